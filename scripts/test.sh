#!/usr/bin/env bash
# scripts/test.sh — idmint's whole test suite, against real servers.
#
# Installs (as root, from Debian's packages) whatever of PostgreSQL, MariaDB,
# Redis, etcd and ZooKeeper is missing, starts one instance of each on its own
# port with its data under a temporary folder, runs vet and every test with
# the race detector, and stops the servers again. It also installs the
# validators of the deployment files (deploy/validators/install.sh) and
# Debian's chromium (the browser tests, browsertest/) and Maven with JUnit 5
# (the Java client, clients/java, tested from clients/java/javatest). Under
# CI=true a server that cannot start fails the run. Extra arguments go to `go test` (e.g. -run X).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
S=$PWD/scripts/servers.sh
start=$(date +%s)
results=$(mktemp /tmp/idmint-test-results.XXXXXX)

# What this run may install, said before anything is installed. Only what is
# missing is installed, and only as root; without root nothing is installed
# and the tests that need a missing server or tool skip, saying so.
cat >&2 <<'MSG'
test.sh: as root, this installs from Debian whatever is missing of:
  servers:          postgresql mariadb-server mariadb-client redis-server etcd-server zookeeper default-jre-headless
  deploy validators: yamllint docker-compose systemd nodejs npm (then npm ci in deploy/validators)
  browser tests:    chromium fonts-liberation (without their recommended packages)
  gRPC code check:  protobuf-compiler
  release packages: rpm (to read the .rpm; the test installs and purges the .deb it builds)
  Java client:      maven openjdk-17-jdk-headless libmaven-compiler-plugin-java libsurefire-java junit5
                    libmaven-jar-plugin-java libmaven-resources-plugin-java libmaven-install-plugin-java
MSG
if [ "$(id -u)" = 0 ]; then
	log=$(mktemp /tmp/idmint-test-install.XXXXXX.log)
	echo "test.sh: running as root; install output (apt-get, dpkg, npm) goes to $log" >&2
	bash "$S" install >>"$log" 2>&1 || { echo "test.sh: could not install servers (see $log)" >&2; [ "${CI:-}" = true ] && exit 1; echo "test.sh: their tests will skip" >&2; }
	# The deployment files' validators (yamllint, docker-compose, npm's
	# kubernetes-models and dockerfile-utils), pinned in deploy/validators.
	bash deploy/validators/install.sh >>"$log" 2>&1 || { echo "test.sh: could not install the deploy validators (see $log)" >&2; [ "${CI:-}" = true ] && exit 1; echo "test.sh: their tests will skip" >&2; }
	# need WHAT SKIPS PKG...: installs the Debian packages that are missing
	# (dpkg -s), retrying once after apt-get update; under CI=true a failed
	# install fails the run, otherwise the tests that need them skip.
	need() {
		local what=$1 skips=$2
		shift 2
		dpkg -s "$@" >/dev/null 2>&1 && return 0
		{ export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends "$@" || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"; }; } >>"$log" 2>&1 && return 0
		echo "test.sh: could not install $what (see $log)" >&2
		[ "${CI:-}" = true ] && exit 1
		echo "test.sh: $skips will skip" >&2
	}
	# Headless Chromium for the browser tests (browsertest/, a module of its
	# own), without its Recommends (125 of 171 packages, about 11 of 19
	# install minutes on a fresh machine: a desktop's audio, printing and
	# power daemons); fonts-liberation, one of them, is kept so the
	# dashboard's screenshot shows its text.
	need chromium "the dashboard's browser test" chromium fonts-liberation
	# rpm, to read the release's .rpm (deploy's TestReleasePackage; the
	# .deb it installs with dpkg).
	need rpm "the release package test" rpm
	# protoc, for the check that the gRPC API's generated code is fresh.
	need protobuf-compiler "the generated-code check" protobuf-compiler
	# promtool (Debian's prometheus package): promtool check/test rules on
	# deploy/prometheus, and Prometheus's own parser over the Grafana
	# dashboard's queries (deploy/grafana/gen). On a machine with systemd the
	# package also starts a Prometheus on :9090 (harmless in a container).
	need promtool "the alert rules' and dashboard's promtool checks" prometheus
	# The Java client (clients/java): Maven, its plugins and JUnit 5 from
	# Debian's repository, so `mvn -o` builds it offline; its tests run from
	# the Go package clients/java/javatest.
	need "the Java build" "the Java client's tests" maven openjdk-17-jdk-headless libmaven-compiler-plugin-java libsurefire-java junit5 \
		libmaven-jar-plugin-java libmaven-resources-plugin-java libmaven-install-plugin-java
else
	echo "test.sh: not root: nothing is installed; tests whose servers or tools are missing skip" >&2
fi

# summary prints the one line a run ends with: the packages go test passed,
# failed and skipped (no test files), and the wall time.
summary() {
	local pass fail skip
	pass=$(grep -c '^ok ' "$results" || true)
	fail=$(grep -c '^FAIL[[:space:]]' "$results" || true)
	skip=$(grep -c '^?[[:space:]]' "$results" || true)
	echo "test.sh: $pass package(s) passed, $fail failed, $skip skipped (no test files); wall time $(( $(date +%s) - start ))s; exit $1"
}
# gotest runs go test, its output shown as usual and kept for the summary.
gotest() { go test "$@" 2>&1 | tee -a "$results"; }

base=$(mktemp -d /tmp/idmint-test.XXXXXX)
# cleanup runs once, on exit. A signal only exits (128 + its number), and
# the exit runs cleanup: with cleanup on INT and TERM as well, a stopped
# run printed its summary twice, the second blank and after three grep
# errors about the results file the first one had removed.
cleanup() {
	rc=$?
	trap - EXIT INT TERM
	bash "$S" down "$base" >/dev/null 2>&1 || true
	rm -rf "$base"
	summary "$rc"
	rm -f "$results"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if env=$(bash "$S" up "$base"); then
	eval "$env"
	echo "test.sh: servers up under $base" >&2
elif [ "${CI:-}" = true ]; then
	echo "test.sh: a server could not start; under CI=true that fails the run" >&2
	exit 1
else
	echo "test.sh: some servers could not start; tests that need them will skip" >&2
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "test.sh: gofmt would change: $unformatted" >&2; exit 1; fi
# go.mod and go.sum must be what `go mod tidy` makes of the imports, in this
# module and in bench/, browsertest/, tools/helm/ and tools/release/ (modules of their own), so a
# dependency is never marked wrongly nor left behind.
for mod in . bench browsertest tools/helm tools/release; do
	[ -f "$mod/go.mod" ] || continue
	if ! tidy=$(cd "$mod" && go mod tidy -diff); then
		echo "test.sh: go.mod/go.sum in $mod are not tidy; run (cd $mod && go mod tidy):" >&2
		echo "$tidy" >&2
		exit 1
	fi
done
go vet ./...
# Helm, pinned in tools/helm/go.mod (a module of its own), for deploy/'s
# chart tests: built here first, so the test's own build is a cache hit
# (the first build takes minutes; a test's deadline is 12). Without it the
# chart tests skip, and under CI=true they fail.
(cd tools/helm && go tool -n helm >/dev/null) ||
	{ echo "test.sh: could not build helm (tools/helm); the Helm chart's tests will skip" >&2; [ "${CI:-}" = true ] && exit 1; }
# A package's own limit: the slowest (cmd/idmint, client) take 4-7 minutes
# with the race detector on two loaded cores.
gotest -race -count=1 -timeout 12m "$@" ./...
# The simulator once more without the race detector, which leaves time for
# its full seed budget (10,000 seeds and the re-introduced bugs).
gotest -count=1 -timeout 8m "$@" ./testkit/sim
if [ -f bench/go.mod ]; then
	# The peer-comparison module: its tests (uniqueness and format agreement
	# with the peers), then each benchmark once, so it cannot rot unnoticed.
	(cd bench && go vet ./... && gotest -race -count=1 -timeout 10m ./... &&
		go test -count=1 -run '^$' -bench . -benchtime 1x ./...)
fi
if [ -f browsertest/go.mod ]; then
	# The browser tests (headless Chromium against a real server), a module
	# of their own so the browser driver stays out of the main module.
	(cd browsertest && go vet ./... && gotest -race -count=1 -timeout 5m "$@" ./...)
fi
