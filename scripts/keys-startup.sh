#!/usr/bin/env bash
# keys-startup.sh N [STORE_URL]: how long `idmint serve` takes from start to
# the first ID of its last key with N segment keys, fresh (empty store and
# data directory) and on a restart, and its resident memory then.
#
#   bash scripts/keys-startup.sh 10000
#   bash scripts/keys-startup.sh 10000 'postgres://postgres@127.0.0.1:25432/k10?sslmode=disable'
#
# The database of a postgres:// or mysql:// STORE_URL must exist and be
# empty. Uses port 18080 on 127.0.0.1.
set -euo pipefail
n=${1:?usage: keys-startup.sh N [STORE_URL]}
store=${2:-}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=
cd "$(dirname "$0")/.."
go build -o "$dir/idmint" ./cmd/idmint
{
	echo "data_dir: $dir/data"
	[ -n "$store" ] && echo "stores: {default: \"$store\"}"
	echo "keys:"
	for ((i = 0; i < n; i++)); do echo "  k$i: {strategy: segment}"; done
} >"$dir/idmint.yaml"
for run in fresh restart; do
	"$dir/idmint" serve --config "$dir/idmint.yaml" --listen 127.0.0.1:18080 >"$dir/out.log" 2>"$dir/err.log" &
	pid=$!
	start=$(date +%s%N)
	for ((tries = 0; ; tries++)); do
		curl -sf "http://127.0.0.1:18080/v1/keys/k$((n - 1))/ids" >/dev/null 2>&1 && break
		if [ "$tries" -gt 1200 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "keys-startup: no ID within 60 s" >&2
			tail -5 "$dir/err.log" >&2
			exit 1
		fi
		sleep 0.05
	done
	end=$(date +%s%N)
	rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
	printf '%s keys, %s: first ID after %d ms, RSS %d MiB\n' "$n" "$run" $(((end - start) / 1000000)) $((rss / 1024))
	kill "$pid"
	wait "$pid" 2>/dev/null || true
done
