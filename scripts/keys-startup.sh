#!/usr/bin/env bash
# keys-startup.sh N [STORE_URL]: what N segment keys cost `idmint serve`
# at start-up, fresh (empty store and data directory) and on a restart:
#
#   - ready: from exec until /readyz answers 200;
#   - start to first ID: from exec until the last key (kN-1) then answers
#     an ID;
#   - start-up CPU: user + system CPU of the process at its first ID;
#   - memory at ready: resident set (RSS) and heap in use after a forced
#     GC (the admin listener's /debug/pprof/heap?gc=1), in total and per key;
#   - load: a third start (a restart) with scripts/keysload sending
#     single-ID requests round-robin over all N keys from the instant the
#     process is started, for 2 s: answers per half second, req/s over the
#     2 s, how many keys answered; then the memory with every key's first
#     segment loaded;
#   - serve --check: how long validating the configuration takes.
#
#   bash scripts/keys-startup.sh 10000
#   bash scripts/keys-startup.sh 10000 'postgres://postgres@127.0.0.1:25432/k10?sslmode=disable'
#
# The database of a postgres:// or mysql:// STORE_URL must exist and be
# empty. KEYS_LOAD_CONNS sets the load's connections (default 128),
# KEYS_LOAD_SECONDS its length (default 2), KEYS_PORT the port (default
# 18080; the admin listener takes the next one), both on
# 127.0.0.1 and sends traffic nowhere else. KEYS_BIN runs that idmint
# binary instead of building one (another build, to compare two in turn
# on a machine whose load varies).
set -euo pipefail
n=${1:?usage: keys-startup.sh N [STORE_URL]}
store=${2:-}
conns=${KEYS_LOAD_CONNS:-128}
secs=${KEYS_LOAD_SECONDS:-2}
port=${KEYS_PORT:-18080} # the admin listener takes the next port
admin=$((port + 1))
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$(dirname "$0")/.."
if [ -n "${KEYS_BIN:-}" ]; then
	cp "$KEYS_BIN" "$dir/idmint"
else
	go build -o "$dir/idmint" ./cmd/idmint
fi
go build -o "$dir/keysload" ./scripts/keysload
{
	echo "data_dir: $dir/data"
	echo "admin_listen: 127.0.0.1:$admin"
	[ -n "$store" ] && echo "stores: {default: \"$store\"}"
	echo "keys:"
	for ((i = 0; i < n; i++)); do echo "  k$i: {strategy: segment}"; done
} >"$dir/idmint.yaml"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
cpu_ms() { # user + system CPU of pid $1, in ms
	awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$1/stat"
}
memory() { # "RSS X MiB (Y KB/key), heap in use after GC Z MiB (W KB/key)"
	local rss heap
	rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status") # KiB
	heap=$(curl -sf "http://127.0.0.1:$admin/debug/pprof/heap?gc=1&debug=1" | awk '/^# HeapInuse = / {print $4}')
	awk -v rss="$rss" -v heap="${heap:-0}" -v n="$n" 'BEGIN {
		printf "RSS %.1f MiB (%.2f KB/key), heap in use after GC %.1f MiB (%.2f KB/key)",
			rss / 1024, rss * 1.024 / n, heap / 1048576, heap / 1000 / n }'
}
start_serve() {
	"$dir/idmint" serve --config "$dir/idmint.yaml" --listen 127.0.0.1:$port >"$dir/out.log" 2>"$dir/err.log" &
	pid=$!
}
stop_serve() {
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
}
wait_for() { # wait_for URL START: ms from START until URL answers 2xx
	local tries
	for ((tries = 0; ; tries++)); do
		curl -sf "$1" >/dev/null 2>&1 && break
		if [ "$tries" -gt 6000 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "keys-startup: $1 did not answer within 60 s" >&2
			tail -5 "$dir/err.log" >&2
			exit 1
		fi
		sleep 0.01
	done
	ms "$2"
}

for run in fresh restart; do
	start=$(date +%s%N)
	start_serve
	ready=$(wait_for "http://127.0.0.1:$port/readyz" "$start")
	first=$(wait_for "http://127.0.0.1:$port/v1/keys/k$((n - 1))/ids" "$start")
	cpu=$(cpu_ms "$pid")
	printf '%s keys, %s: first ID after %d ms, ready after %d ms, start-up CPU %d ms; at ready %s\n' \
		"$n" "$run" "$first" "$ready" "$cpu" "$(memory)"
	stop_serve
done

start=$(date +%s%N)
start_serve
"$dir/keysload" -url http://127.0.0.1:$port -keys "$n" -since "$start" -d "${secs}s" -c "$conns" | sed "s/^/$n keys, load ($conns connections): /"
printf '%s keys, after the load: %s\n' "$n" "$(memory)"
stop_serve

start=$(date +%s%N)
"$dir/idmint" serve --config "$dir/idmint.yaml" --check >/dev/null
printf '%s keys, serve --check: %d ms\n' "$n" "$(ms "$start")"
