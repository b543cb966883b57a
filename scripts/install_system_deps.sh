#!/usr/bin/env bash
# Installs the system packages the test suite needs (Prometheus server, promtool and
# the Pushgateway; PostgreSQL for the shared SQL catalog of the deployment tests), only
# where they are missing. Needs root or passwordless sudo; Java 17 is expected.
# Everything else the tests start (SeaweedFS, DuckDB, Spark) comes from pip: make env.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
# Maven fetches Spark's Kafka source and Apache Kafka (make env: icesink/jobs/fetch_jvm_jars.py).
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || missing+=(prometheus-pushgateway)
# Debian keeps initdb and postgres off the PATH, in /usr/lib/postgresql/<major>/bin.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo -n"
fi
echo "installing system packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The Debian packages start their services on install where systemd runs; the tests
# start their own servers on 127.0.0.1 (PostgreSQL in a fresh cluster of a temporary
# folder, as the postgres user), so the packaged services are not needed.
# (prometheus appears twice in "missing" when both binaries lack: apt takes it once.)
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
