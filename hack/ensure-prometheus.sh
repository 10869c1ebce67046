#!/usr/bin/env bash
# ensure-prometheus.sh installs Prometheus from the Debian archive when it is not on PATH (test/promreal runs it
# on loopback). The tests start their own instance on a free port, so a system service the package may start on
# :9090 does not interfere.
set -euo pipefail
if [ -x "${PROMETHEUS_BIN:-}" ] || command -v prometheus >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-prometheus: prometheus is missing and this is not a Debian-based system; install it and put it on PATH (or set PROMETHEUS_BIN)" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
prometheus --version | head -1
