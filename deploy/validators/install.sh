#!/usr/bin/env bash
# Installs the validators deploy/deploy_test.go runs (as root): yamllint and
# docker-compose from Debian's packages (systemd-analyze comes with
# systemd), kubernetes-models (with its prometheus-operator models, for the
# Helm chart's ServiceMonitor) and dockerfile-utils from npm into
# deploy/validators/node_modules (versions pinned in package-lock.json).
# Without them the validator tests skip, except under CI=true.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
missing=()
command -v yamllint >/dev/null || missing+=(yamllint)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v node >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ -f node_modules/kubernetes-models/package.json ] && [ -f node_modules/@kubernetes-models/prometheus-operator/package.json ] &&
	[ -x node_modules/.bin/dockerfile-utils ] ||
	npm ci --no-audit --no-fund --loglevel=error
