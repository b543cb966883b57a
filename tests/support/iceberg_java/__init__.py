"""Iceberg Java as the tests' second reader: its Maven pom, the reader process and its client."""
