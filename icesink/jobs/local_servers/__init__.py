"""Servers on loopback for ``make demo-cluster`` and the deployment tests: SeaweedFS, a Spark cluster."""
