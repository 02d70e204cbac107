#!/usr/bin/env bash
# servers.sh — install, start, stop and kill the real servers idmint's tests
# talk to: PostgreSQL, MariaDB, Redis, etcd and ZooKeeper. Each instance lives
# in a directory of its own (data, log, pid file) on a port of its own, so a
# test can stop, kill -9, pause or restart one without touching the machine's
# own services.
#
#   servers.sh install [KIND...]         apt-get what is missing (root only)
#   servers.sh start KIND DIR PORT [ARG...]  init DIR if new, start, wait ready
#   servers.sh replica KIND DIR PORT PRIMARY_HOST:PRIMARY_PORT [ARG...]
#                                        init DIR as an async streaming replica
#                                        of that primary, start, wait until it
#                                        replicates (postgres, mariadb only)
#   servers.sh promote DIR               make a replica a writable primary
#   servers.sh stop DIR                  graceful stop, waits for the exit
#   servers.sh kill DIR                  SIGKILL, waits for the exit
#   servers.sh pause DIR                 SIGSTOP, waits until every thread stopped
#   servers.sh resume DIR                SIGCONT, waits until it runs again
#   servers.sh pid DIR                   print the server's pid
#   servers.sh up BASE                   start every kind on the shared ports (the next free ones if taken),
#                                        print `export IDMINT_TEST_...` lines
#   servers.sh down BASE                 stop everything `up` started
#
# KIND is one of: postgres mariadb redis etcd zookeeper.
#
# Replication. Every PostgreSQL and MariaDB that start launches can serve as
# a primary: PostgreSQL runs with wal_level=replica and WAL senders (initdb
# -A trust lets 127.0.0.1 connect for replication too), MariaDB with a ROW
# binlog (log_slave_updates on, server_id = its port, so ids are unique on
# this machine). `replica` builds an ASYNCHRONOUS replica in a new DIR; the
# primary's address may be a proxy's (testkit/tcpproxy), so a test can cut
# the replication link and heal it:
#   postgres: pg_basebackup -R -X stream -c fast from the primary, then
#     start; standby.signal and primary_conninfo (in postgresql.auto.conf)
#     make it a hot standby, also when restarted with `start`. It retries a
#     lost link every second (wal_retrieve_retry_interval, in its conf).
#   mariadb: a fresh mariadb-install-db, start (own server_id; read_only,
#     also when restarted, until promoted), then CHANGE MASTER TO the
#     primary as root with MASTER_USE_GTID=slave_pos from an empty
#     gtid_slave_pos, and START SLAVE: the replica replays the primary's
#     binlog from its very first event, so the primary must have run with
#     the binlog since its first start (start sees to it) and never purged
#     it. That holds for the fresh primaries of tests and avoids a dump and
#     load. A lost link is retried every second
#     (MASTER_CONNECT_RETRY=1, kept in the replica's master.info).
# Either kind notices a link that goes silent (a Blackhole) only after its
# default 60 s (wal_receiver_timeout, slave_net_timeout), or when the proxy
# resets the connection (Cut, and Heal after a Blackhole).
# `replica` returns once the replica is streaming (postgres: its WAL
# receiver says so; mariadb: both slave threads run), not once it has caught
# up. `promote` makes it a primary: postgres pg_ctl promote -w, waiting
# until pg_is_in_recovery() is false; mariadb stops the IO thread, lets the
# SQL thread apply what was received, then STOP SLAVE, RESET SLAVE ALL and
# read_only off. Writes the replica never received are lost, as they would
# be in a real failover to a lagging async replica.
#
# Nothing here waits without a bound: every readiness probe runs under its own
# timeout (PROBE_TIMEOUT seconds) and start gives up after START_TIMEOUT
# seconds (env IDMINT_SERVER_START_TIMEOUT), printing the log's tail and
# killing what it launched; replica and promote wait as long at most for
# each of their own steps, and the SQL they send runs under a timeout too.
# DIR/server.pid names the server process itself from the moment it is
# launched, so stop and kill work on a half-started one.
set -euo pipefail

KINDS="postgres mariadb redis etcd zookeeper"
PROBE_TIMEOUT=2
START_TIMEOUT=${IDMINT_SERVER_START_TIMEOUT:-60}
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

die() { echo "servers.sh: $*" >&2; exit 1; }

pgbin() {
	local b
	for b in /usr/lib/postgresql/*/bin; do [ -x "$b/postgres" ] && { echo "$b"; return; }; done
	command -v postgres >/dev/null 2>&1 && { dirname "$(command -v postgres)"; return; }
	return 1
}

has() {
	case "$1" in
	postgres) pgbin >/dev/null ;;
	mariadb) command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] ;;
	redis) command -v redis-server >/dev/null ;;
	etcd) command -v etcd >/dev/null ;;
	zookeeper) [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null ;;
	*) die "unknown kind '$1' (want one of: $KINDS)" ;;
	esac
}

package_of() {
	case "$1" in
	postgres) echo postgresql ;;
	mariadb) echo "mariadb-server mariadb-client" ;;
	redis) echo redis-server ;;
	etcd) echo etcd-server ;;
	zookeeper) echo "zookeeper default-jre-headless" ;;
	esac
}

install() {
	local kinds=${*:-$KINDS} k want=""
	for k in $kinds; do has "$k" || want="$want $(package_of "$k")"; done
	[ -z "$want" ] && return 0
	[ "$(id -u)" = 0 ] || die "missing servers ($want ); run as root to apt-get install them"
	echo "servers.sh: installing$want" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	# Debian's maintainer scripts try to start the packaged services; keep them
	# from grabbing the standard ports: the tests start their own instances.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	apt-get install -y -qq --no-install-recommends $want >&2 || { rm -f /usr/sbin/policy-rc.d; die "apt-get install$want failed"; }
	rm -f /usr/sbin/policy-rc.d
}

# Postgres refuses to run as root: as root we run it as the postgres user,
# which needs to reach DIR through its (often 0700) parents. setpriv execs
# postgres in its own place; runuser would not do: it forks, waits, and stops
# itself whenever its child stops (util-linux su-common.c, the WIFSTOPPED
# branch of its wait loop), so until start-up ended the pid file named
# runuser, and every pause of the server left a stopped runuser behind.
pg_user_prefix() {
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || useradd --system --home /nonexistent postgres
		local d=$1
		while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
		chown -R postgres "$1"
		echo "setpriv --reuid=$(id -u postgres) --regid=$(id -g postgres) --init-groups --"
	fi
}

# probe runs one readiness check under its own timeout: a server that
# accepts the connection but never answers nor closes it (ZooKeeper does
# that when a four-letter word arrives while it is still starting: an
# exception on the connection, and the socket stays open) costs one
# PROBE_TIMEOUT, not the whole run.
probe() { timeout -k 1 "$PROBE_TIMEOUT" "$@" >/dev/null 2>&1; }

ready() { # KIND DIR PORT
	case "$1" in
	postgres) probe "$(pgbin)/pg_isready" -q -t "$PROBE_TIMEOUT" -h 127.0.0.1 -p "$3" ;;
	mariadb) probe mariadb-admin --no-defaults -h127.0.0.1 -P"$3" -uroot --connect-timeout=1 ping ;;
	redis) probe bash -c '[ "$(redis-cli -h 127.0.0.1 -p "$1" ping)" = PONG ]' _ "$3" ;;
	etcd) probe bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET /health HTTP/1.0\r\n\r\n" >&3 && grep -q "\"health\":\"true\"" <&3' _ "$3" ;;
	zookeeper) probe bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && grep -q imok <&3' _ "$3" ;;
	esac
}

# tree PID prints PID and all its descendants, parents first.
tree() {
	local p
	echo "$1"
	for p in $(pgrep -P "$1" 2>/dev/null); do tree "$p"; done
}

# targets DIR prints the pids a signal to the server must reach: PostgreSQL
# serves each connection from a child process of its own, so pausing only
# the postmaster would leave open connections answering.
targets() {
	local pid
	pid=$(cat "$1/server.pid")
	if [ "$(cat "$1/kind" 2>/dev/null)" = postgres ]; then tree "$pid"; else echo "$pid"; fi
}

# port_free reports whether nothing listens on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_user() { ss -ltnpH "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\("[^"]*",pid=[0-9]*\).*/\1/p' | head -1; }

alive() { [ -f "$1/server.pid" ] && kill -0 "$(cat "$1/server.pid")" 2>/dev/null; }

start() {
	local kind=$1 dir=$2 port=$3
	shift 3
	has "$kind" || die "$kind is not installed; run: sudo $SELF install $kind"
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	echo "$kind" >"$dir/kind"
	echo "$port" >"$dir/port"
	alive "$dir" && die "$kind in $dir is already running (pid $(cat "$dir/server.pid"))"
	local log=$dir/server.log pid
	case "$kind" in
	postgres)
		local as b
		b=$(pgbin)
		as=$(pg_user_prefix "$dir")
		if [ ! -f "$dir/data/PG_VERSION" ]; then
			$as "$b/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
		fi
		# fsync stays on: kill -9 of the server keeps the OS cache, so it costs
		# nothing in speed worth saving and keeps crash tests honest.
		# wal_level and max_wal_senders are PostgreSQL 15's defaults, spelt
		# out because a replica depends on them; wal_keep_size lets a
		# replica whose link was cut for a while catch up once healed.
		setsid $as "$b/postgres" -D "$dir/data" -p "$port" -k "$dir" -c listen_addresses=127.0.0.1 \
			-c max_connections=200 -c shared_buffers=32MB \
			-c wal_level=replica -c max_wal_senders=10 -c wal_keep_size=64MB "$@" >>"$log" 2>&1 </dev/null &
		;;
	mariadb)
		# Each server has its own tmpdir: the bootstrap of mariadb-install-db
		# names its temporary tables after its pid in the shared /tmp, and a CI
		# run saw one bootstrap lose such a file ("Could not remove temporary
		# table ... error: 2", then "Unknown table 'mysql.tmp_user_sys'")
		# while other tests started servers beside it.
		mkdir -p "$dir/tmp"
		if [ ! -d "$dir/data/mysql" ]; then
			mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" --tmpdir="$dir/tmp" \
				--auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
		fi
		# A replica not yet promoted stays read-only across restarts.
		[ -f "$dir/read-only" ] && set -- --read-only "$@"
		setsid mariadbd --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --port="$port" --bind-address=127.0.0.1 \
			--socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --user="$(id -un)" \
			--skip-name-resolve --innodb-buffer-pool-size=64M --innodb-log-file-size=16M \
			--max-connections=300 \
			--log-bin=mysql-bin --server-id="$port" --binlog-format=ROW --log-slave-updates --relay-log=relay-bin \
			--log-bin-trust-function-creators=1 "$@" >>"$log" 2>&1 </dev/null &
		;;
	redis)
		setsid redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/data" --daemonize no \
			--save "" --appendonly no --logfile "" "$@" >>"$log" 2>&1 </dev/null &
		;;
	etcd)
		local peer=$((port + 1))
		setsid etcd --name idmint --data-dir "$dir/data" \
			--listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
			--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
			--initial-cluster "idmint=http://127.0.0.1:$peer" "$@" >>"$log" 2>&1 </dev/null &
		;;
	zookeeper)
		cat >"$dir/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
maxSessionTimeout=60000
minSessionTimeout=1000
CFG
		local cp=/etc/zookeeper/conf
		for j in zookeeper zookeeper-jute slf4j-api slf4j-log4j12 log4j-1.2 netty-handler netty-common \
			netty-buffer netty-transport netty-codec netty-resolver netty-transport-native-epoll \
			netty-transport-native-unix-common metrics-core snappy-java jline commons-cli; do
			[ -f "/usr/share/java/$j.jar" ] && cp="$cp:/usr/share/java/$j.jar"
		done
		setsid java -Xmx256m -XX:+UseSerialGC -Dzookeeper.log.dir="$dir" -Dzookeeper.root.logger=INFO,CONSOLE \
			-Dzookeeper.admin.enableServer=false -cp "$cp" \
			org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" "$@" >>"$log" 2>&1 </dev/null &
		;;
	*) die "unknown kind '$kind' (want one of: $KINDS)" ;;
	esac
	# A background job of a non-interactive shell is no process-group
	# leader, so setsid execs in place (no fork): $! is the server itself,
	# and setpriv execs too. The pid file holds it before the first probe.
	pid=$!
	disown "$pid" 2>/dev/null || true # no "Killed" job notices from this shell
	echo "$pid" >"$dir/server.pid"
	local deadline=$((SECONDS + START_TIMEOUT)) tries=0
	# Bounded twice: by the deadline, and by a number of tries (each at
	# most PROBE_TIMEOUT+1 s) should SECONDS misbehave.
	while [ "$SECONDS" -lt "$deadline" ] && [ "$tries" -lt $((START_TIMEOUT * 10)) ]; do
		tries=$((tries + 1))
		if ready "$kind" "$dir" "$port"; then
			case "$kind" in
			postgres) head -n 1 "$dir/data/postmaster.pid" >"$dir/server.pid" ;;
			mariadb) [ -s "$dir/mysqld.pid" ] && cp "$dir/mysqld.pid" "$dir/server.pid" ;;
			esac
			[ "$(cat "$dir/server.pid")" = "$pid" ] || echo "servers.sh: $kind pid file says $(cat "$dir/server.pid"), launched $pid" >&2
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 30 "$log" >&2
			rm -f "$dir/server.pid"
			die "$kind exited during start-up (log: $log)"
		fi
		sleep 0.1
	done
	tail -n 30 "$log" >&2
	killit "$dir" || true
	die "$kind on port $port not ready after ${START_TIMEOUT} s ($tries probes); killed it (log: $log)"
}

wait_gone() { # PID SECONDS
	local i
	for i in $(seq 1 $(($2 * 10))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

stop() {
	local dir=$1 pid
	[ -f "$dir/server.pid" ] || return 0
	pid=$(cat "$dir/server.pid")
	kill -CONT $(targets "$dir") 2>/dev/null || true
	if [ "$(cat "$dir/kind" 2>/dev/null)" = postgres ]; then kill -INT "$pid" 2>/dev/null || true; else kill -TERM "$pid" 2>/dev/null || true; fi
	wait_gone "$pid" 30 || { kill -KILL "$pid" 2>/dev/null || true; wait_gone "$pid" 10 || true; }
	rm -f "$dir/server.pid"
}

killit() {
	local dir=$1 pid all
	[ -f "$dir/server.pid" ] || return 0
	pid=$(cat "$dir/server.pid")
	all=$(targets "$dir")
	kill -KILL "$pid" 2>/dev/null || true
	# Backends paused with the postmaster would never see it die.
	kill -CONT $all 2>/dev/null || true
	wait_gone "$pid" 10 || die "pid $pid survived SIGKILL"
	if [ "$(cat "$dir/kind" 2>/dev/null)" = postgres ]; then
		# Backends notice their postmaster's death and exit; wait for them so a
		# restart finds the port and shared memory free.
		local p
		for p in $all; do wait_gone "$p" 10 || true; done
	fi
	rm -f "$dir/server.pid"
}

# state PID prints the scheduler states of all PID's threads (R, S, D, T...).
# Prints nothing for a pid that is gone, and never fails.
state() { { cat /proc/"$1"/task/*/stat 2>/dev/null || true; } | sed 's/^.*) \(.\).*$/\1/' | sort -u | tr -d '\n'; }

# pause stops the server (for PostgreSQL, every process of it) and returns
# only once every thread of it is stopped, so a caller may rely on it: a
# request sent after pause returns is never answered until resume.
pause() {
	local dir=$1 p i s
	[ -f "$dir/server.pid" ] || die "no server in $dir (no server.pid)"
	local pids
	kill -0 "$(cat "$dir/server.pid")" 2>/dev/null || die "server in $dir (pid $(cat "$dir/server.pid")) is not running"
	pids=$(targets "$dir")
	kill -STOP $pids 2>/dev/null || true # a backend may have just exited
	for p in $pids; do
		for i in $(seq 1 100); do
			s=$(state "$p")
			[ -z "$s" ] || [ "$s" = T ] && break
			sleep 0.05
		done
		[ -z "$s" ] || [ "$s" = T ] || die "pid $p not stopped 5 s after SIGSTOP (thread states: $s)"
	done
}

# resume continues every process pause stopped and waits until none is
# stopped any more.
resume() {
	local dir=$1 p i s
	[ -f "$dir/server.pid" ] || die "no server in $dir (no server.pid)"
	local pids
	pids=$(targets "$dir")
	kill -CONT $pids 2>/dev/null || true
	for p in $pids; do
		for i in $(seq 1 100); do
			s=$(state "$p")
			[[ $s == *T* ]] || break
			sleep 0.05
		done
		[[ $s != *T* ]] || die "pid $p still stopped 5 s after SIGCONT"
	done
}

# waitfor WHAT CMD...: runs CMD every 0.1 s until it succeeds, bounded as
# start is: by START_TIMEOUT seconds and by a number of tries. CMD must
# bound itself (the probes below run under PROBE_TIMEOUT).
waitfor() {
	local what=$1 deadline=$((SECONDS + START_TIMEOUT)) tries=0
	shift
	while [ "$SECONDS" -lt "$deadline" ] && [ "$tries" -lt $((START_TIMEOUT * 10)) ]; do
		tries=$((tries + 1))
		"$@" && return 0
		sleep 0.1
	done
	echo "servers.sh: gave up after ${START_TIMEOUT} s ($tries tries) waiting for $what" >&2
	return 1
}

# pgq PORT SQL and myq PORT SQL print the answer to one query, unaligned,
# without headers; each runs under PROBE_TIMEOUT (myq's caller may give a
# longer bound as a third argument).
pgq() { timeout -k 1 "$PROBE_TIMEOUT" "$(pgbin)/psql" -X -q -tA -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2" 2>/dev/null; }
myq() { timeout -k 1 "${3:-$PROBE_TIMEOUT}" mariadb --no-defaults -h127.0.0.1 -P"$1" -uroot --connect-timeout=1 -N -B -e "$2"; }

pg_streaming() { [ "$(pgq "$1" "SELECT status FROM pg_stat_wal_receiver")" = streaming ]; }
pg_primary() { [ "$(pgq "$1" "SELECT pg_is_in_recovery()")" = f ]; }
# mystatus PORT prints SHOW SLAVE STATUS, one "Field: value" a line.
mystatus() { timeout -k 1 "$PROBE_TIMEOUT" mariadb --no-defaults -h127.0.0.1 -P"$1" -uroot --connect-timeout=1 -e 'SHOW SLAVE STATUS\G'; }
my_field() { mystatus "$1" 2>/dev/null | sed -n "s/^ *$2: //p"; }
my_streaming() {
	local st
	st=$(mystatus "$1" 2>/dev/null) || return 1
	grep -q '^ *Slave_IO_Running: Yes$' <<<"$st" && grep -q '^ *Slave_SQL_Running: Yes$' <<<"$st"
}

# replica KIND DIR PORT PRIMARY_HOST:PRIMARY_PORT [ARG...]: see the header.
# DIR must be new (or hold no data yet); ARGs go to the server's command
# line as with start. A replica that cannot replicate is killed.
replica() {
	local kind=$1 dir=$2 port=$3 primary=$4
	shift 4
	local phost=${primary%:*} pport=${primary##*:}
	[ "$phost" != "$primary" ] && [ -n "$phost" ] && [[ $pport =~ ^[0-9]+$ ]] || die "primary '$primary' is not HOST:PORT"
	case "$kind" in postgres | mariadb) ;; *) die "replica wants postgres or mariadb, not '$kind'" ;; esac
	has "$kind" || die "$kind is not installed; run: sudo $SELF install $kind"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ -z "$(ls -A "$dir/data" 2>/dev/null)" ] || die "$dir/data is not empty: a replica starts from a new DIR (restart one with: start $kind DIR PORT)"
	case "$kind" in
	postgres)
		local as b
		b=$(pgbin)
		as=$(pg_user_prefix "$dir")
		rm -rf "$dir/data"
		# -c fast: checkpoint now rather than spread out; -X stream copies
		# the WAL written meanwhile; -R writes standby.signal and
		# primary_conninfo (host and port as given: the proxy's).
		$as timeout -k 5 "$START_TIMEOUT" "$b/pg_basebackup" -D "$dir/data" -h "$phost" -p "$pport" -U postgres \
			-X stream -R -c fast --no-sync >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; die "pg_basebackup from $primary failed"; }
		echo "wal_retrieve_retry_interval = '1s'" >>"$dir/data/postgresql.conf"
		start postgres "$dir" "$port" "$@"
		waitfor "the postgres replica on port $port to stream from $primary" pg_streaming "$port" || {
			tail -n 30 "$dir/server.log" >&2
			killit "$dir" || true
			die "postgres replica on port $port does not replicate from $primary; killed it (log: $dir/server.log)"
		}
		;;
	mariadb)
		touch "$dir/read-only"
		start mariadb "$dir" "$port" "$@"
		# An empty gtid_slave_pos: replay the primary's binlog from its start.
		myq "$port" "RESET MASTER; SET GLOBAL gtid_slave_pos = '';
			CHANGE MASTER TO MASTER_HOST = '$phost', MASTER_PORT = $pport, MASTER_USER = 'root', MASTER_PASSWORD = '',
				MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
			START SLAVE" 30 || { killit "$dir" || true; die "could not set up mariadb replication from $primary; killed the replica"; }
		waitfor "the mariadb replica on port $port to replicate from $primary" my_streaming "$port" || {
			mystatus "$port" >&2 || true
			tail -n 30 "$dir/server.log" >&2
			killit "$dir" || true
			die "mariadb replica on port $port does not replicate from $primary; killed it (log: $dir/server.log)"
		}
		;;
	esac
}

# promote DIR: see the header. Returns once the server takes writes.
promote() {
	local dir=$1 kind port
	alive "$dir" || die "no server running in $dir"
	kind=$(cat "$dir/kind")
	port=$(cat "$dir/port")
	case "$kind" in
	postgres)
		local as
		as=$(pg_user_prefix "$dir")
		$as timeout -k 5 "$START_TIMEOUT" "$(pgbin)/pg_ctl" promote -D "$dir/data" -w -t "$START_TIMEOUT" >&2 || die "pg_ctl promote in $dir failed"
		waitfor "postgres on port $port to leave recovery" pg_primary "$port" || die "postgres on port $port still in recovery after promote"
		;;
	mariadb)
		# Like a careful failover: no more events from the old primary, but
		# those already received (the relay log) are applied first.
		myq "$port" "STOP SLAVE IO_THREAD" 30 || die "STOP SLAVE IO_THREAD on port $port failed"
		local io
		io=$(my_field "$port" Gtid_IO_Pos)
		if [ -n "$io" ]; then
			[ "$(myq "$port" "SELECT MASTER_GTID_WAIT('$io', $START_TIMEOUT)" $((START_TIMEOUT + 5)))" = 0 ] ||
				die "mariadb on port $port did not apply its relay log (up to $io) within ${START_TIMEOUT} s"
		fi
		myq "$port" "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF" 30 || die "promoting mariadb on port $port failed"
		rm -f "$dir/read-only"
		;;
	*) die "promote wants a postgres or mariadb replica, not '$kind'" ;;
	esac
}

# Shared instances for one test run, on ports of their own.
declare -A PORT=([postgres]=25432 [mariadb]=23306 [redis]=26379 [etcd]=22379 [zookeeper]=22181)

up() {
	local base=$1 k
	# Everything is checked before anything starts, and a server that does
	# not start stops the ones before it: a half-done up left servers
	# running on the ports with their data directory gone, and the next up
	# then met them ("could not open file global/pg_filenode.map").
	# A port in use (another run's servers, a session's own) moves that kind
	# to the next free one, in steps of 10 (etcd also takes port+1 for its
	# peers); the ports taken are in the exported variables. A fixed port
	# met by servers left running once failed a CI run in its first seconds.
	for k in $KINDS; do
		has "$k" || die "$k is not installed; run: sudo $SELF install $KINDS"
		local p=${PORT[$k]} n=0
		until port_free "$p" && port_free $((p + 1)); do
			n=$((n + 1))
			[ "$n" -le 50 ] || die "no free port for $k from ${PORT[$k]} to $p (in use at ${PORT[$k]}: $(port_user "${PORT[$k]}"))"
			p=$((p + 10))
		done
		[ "$p" = "${PORT[$k]}" ] || echo "servers.sh: port ${PORT[$k]} for $k is in use ($(port_user "${PORT[$k]}")); using $p" >&2
		PORT[$k]=$p
	done
	mkdir -p "$base"
	for k in $KINDS; do
		(start "$k" "$base/$k" "${PORT[$k]}") >&2 || { down "$base" >&2; return 1; }
	done
	"$(pgbin)/psql" -q -h 127.0.0.1 -p "${PORT[postgres]}" -U postgres -c 'CREATE DATABASE idmint' >/dev/null
	mariadb --no-defaults -h127.0.0.1 -P"${PORT[mariadb]}" -uroot -e 'CREATE DATABASE IF NOT EXISTS idmint'
	cat <<ENV
export IDMINT_TEST_POSTGRES='postgres://postgres@127.0.0.1:${PORT[postgres]}/idmint?sslmode=disable'
export IDMINT_TEST_MYSQL='root@tcp(127.0.0.1:${PORT[mariadb]})/idmint'
export IDMINT_TEST_REDIS='127.0.0.1:${PORT[redis]}'
export IDMINT_TEST_ETCD='127.0.0.1:${PORT[etcd]}'
export IDMINT_TEST_ZOOKEEPER='127.0.0.1:${PORT[zookeeper]}'
export IDMINT_TEST_SERVERCTL='$SELF'
ENV
}

down() {
	local base=$1 k
	for k in $KINDS; do [ -d "$base/$k" ] && stop "$base/$k"; done
	return 0
}

cmd=${1:-}
[ -n "$cmd" ] && shift
case "$cmd" in
install) install "$@" ;;
start) [ $# -ge 3 ] || die "usage: start KIND DIR PORT [ARG...]"; start "$@" ;;
replica) [ $# -ge 4 ] || die "usage: replica KIND DIR PORT PRIMARY_HOST:PRIMARY_PORT [ARG...]"; replica "$@" ;;
promote) [ $# = 1 ] || die "usage: promote DIR"; promote "$1" ;;
stop) [ $# = 1 ] || die "usage: stop DIR"; stop "$1" ;;
kill) [ $# = 1 ] || die "usage: kill DIR"; killit "$1" ;;
pause) [ $# = 1 ] || die "usage: pause DIR"; pause "$1" ;;
resume) [ $# = 1 ] || die "usage: resume DIR"; resume "$1" ;;
pid) [ $# = 1 ] || die "usage: pid DIR"; cat "$1/server.pid" ;;
up) [ $# = 1 ] || die "usage: up BASE"; up "$1" ;;
down) [ $# = 1 ] || die "usage: down BASE"; down "$1" ;;
*) die "usage: servers.sh install|start|replica|promote|stop|kill|pause|resume|pid|up|down (see the comment at the top)" ;;
esac
