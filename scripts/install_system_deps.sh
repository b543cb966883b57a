#!/usr/bin/env bash
# Installs the system packages the test suite needs (Prometheus server, promtool and
# the Pushgateway), only where they are missing. Needs root or passwordless sudo; Java 17 is expected.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || missing+=(prometheus-pushgateway)

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
# start their own servers on 127.0.0.1, so the packaged services are not needed.
# (prometheus appears twice in "missing" when both binaries lack: apt takes it once.)
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
