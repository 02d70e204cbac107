#!/usr/bin/env bash
# regions-soak.sh [DURATION [PACE]]: the long run of the two-region proof
# (TestRegions in testkit/regions, see docs/regions.md).
#
# Two regions on this machine, each with its own etcd, its own PostgreSQL
# (one with a streaming replica) and three `idmint serve` nodes, under load
# on seven keys, repeat the fault cycle until DURATION (default 10m) has
# passed: the link between the regions cut while a node of each restarts,
# one region's PostgreSQL failing over to a lagging replica (a new replica
# each cycle), the other region's etcd killed and restarted. Then a node
# moves between the regions and a third region claiming a taken index is
# refused. Every ID is kept; the run fails on one ID issued twice across
# the regions, a node's IDs out of order, an ID outside its region's share,
# or the monotonic key out of real-time order within a region. It ends
# with the figures: IDs per key and region, refusals per region and phase,
# requests per second, the machine's load.
#
# Each loader pauses PACE (default 20ms) between answers, so that every ID
# of the run fits in memory: at 20ms on a loaded 2-core machine about
# 27,000 IDs a second, some 55 MiB of the test's heap a minute (give a
# larger PACE, e.g. 50ms, to runs longer than 20 minutes). The suite's
# short run is the same test once through at 2ms.
#
#   bash scripts/regions-soak.sh 30m
#   bash scripts/regions-soak.sh 5m 5ms     # shorter, harder
#
# It uses the servers of IDMINT_TEST_ETCD and IDMINT_TEST_POSTGRES when set
# (scripts/servers.sh up prints them); otherwise it starts the test servers
# as scripts/test.sh does (scripts/servers.sh up, which wants every kind
# installed: as root, bash scripts/servers.sh install) and stops them at the
# end. The test's output is kept in a log file it names.
set -euo pipefail
dur=${1:-10m}
pace=${2:-20ms}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
S=$PWD/scripts/servers.sh
# The run's own timeout: its length, plus 20 minutes for the last cycle,
# the move and the check of every ID.
case $dur in
*h) mins=$((${dur%h} * 60)) ;;
*m) mins=${dur%m} ;;
*s) mins=$((${dur%s} / 60)) ;;
*) mins=x ;;
esac
if ! [[ $mins =~ ^[0-9]+$ ]] || ! [[ $pace =~ ^[0-9]+(ms|s)$ ]]; then
	echo "regions-soak.sh: usage: regions-soak.sh [DURATION [PACE]], DURATION in whole s, m or h (e.g. 30m), PACE in ms or s (e.g. 20ms); got '$dur' '$pace'" >&2
	exit 2
fi
timeout=$((mins + 20))m
base=
cleanup() {
	if [ -n "$base" ]; then
		bash "$S" down "$base" >/dev/null 2>&1 || true
		rm -rf "$base"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -z "${IDMINT_TEST_ETCD:-}" ] || [ -z "${IDMINT_TEST_POSTGRES:-}" ]; then
	base=$(mktemp -d /tmp/idmint-regions-soak.XXXXXX)
	env=$(bash "$S" up "$base") || { echo "regions-soak.sh: the test servers did not start" >&2; exit 1; }
	eval "$env"
	echo "regions-soak.sh: servers up under $base" >&2
fi
export IDMINT_TEST_SERVERCTL=${IDMINT_TEST_SERVERCTL:-$S}
log=$(mktemp /tmp/idmint-regions-soak.XXXXXX.log)
echo "regions-soak.sh: running for $dur (loaders pause $pace); output in $log" >&2
rc=0
CI=true go test -count=1 -run '^TestRegions$' -timeout "$timeout" -v ./testkit/regions/ \
	-args -regions.long="$dur" -regions.pace="$pace" >"$log" 2>&1 || rc=$?
grep -E '^\s+regions_test\.go:[0-9]+: (phase|region|key|north|west|east|servers|[0-9]+ requests)' "$log" | sed -E 's/^\s+regions_test\.go:[0-9]+: //' || true
tail -n 3 "$log"
exit "$rc"
