#!/usr/bin/env bash
# scripts/release.sh OUTDIR [VERSION] — idmint's release artifacts, reproducibly.
#
# Builds into OUTDIR (created; it must be empty):
#   idmint-VERSION-linux-ARCH             static binaries (CGO_ENABLED=0, -trimpath) for amd64 and arm64
#   idmint-VERSION-linux-ARCH.spdx.json   the SBOM of each binary (SPDX 2.3, from its Go build information)
#   idmint_PKGVER-1_ARCH.deb              Debian package: /usr/bin/idmint, the systemd unit,
#   idmint-PKGVER-1.ARCH.rpm              /etc/idmint/idmint.yaml, the idmint user, /var/lib/idmint
#   SHA256SUMS                            sha256sum of every file above (check with sha256sum -c SHA256SUMS)
#
# VERSION defaults to `git describe --tags --always --dirty`; PKGVER is it as
# Debian and RPM order versions (v1.2.3 -> 1.2.3, v1.2.3-rc.1 -> 1.2.3~rc.1,
# v1.2.3-4-gabc1234 -> 1.2.3+4.gabc1234, a bare commit abc1234 -> 0.0.0~git.abc1234).
# Every time stamp is the last commit's (SOURCE_DATE_EPOCH, unless set), so
# the same commit built twice, anywhere, gives the same bytes.
#
# The binaries carry their identity (`idmint version`, idmint_build_info):
# -ldflags "-X main.version=VERSION -X main.commit=HASH -X main.commitTime=TIME
# -X main.modified=true|false" (whether tracked files had uncommitted changes).
#
# Narrower builds (the test suite's): RELEASE_ARCHES="amd64" and
# RELEASE_PACKAGES="deb" (default "amd64 arm64" and "deb rpm"; RELEASE_PACKAGES=""
# builds binaries and SBOMs only). The packager, nfpm, is a pinned Go tool
# in its own module, tools/release/go.mod.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

die() {
	echo "release.sh: $*" >&2
	exit 1
}

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/release.sh OUTDIR [VERSION]"
out=$1
mkdir -p "$out" || die "cannot create OUTDIR $out"
out=$(cd "$out" && pwd)
[ -z "$(ls -A "$out")" ] || die "OUTDIR $out is not empty (SHA256SUMS would name stale files); give an empty or new directory"

if git rev-parse --git-dir >/dev/null 2>&1; then
	commit=$(git rev-parse HEAD)
	commit_epoch=$(git log -1 --format=%ct)
	version=${2:-$(git describe --tags --always --dirty)}
	# As git describe --dirty sees it: changes to tracked files.
	modified=false
	[ -z "$(git status --porcelain --untracked-files=no)" ] || modified=true
else
	# A source tree without git (an unpacked archive): say what git would.
	commit=""
	modified=""
	[ $# -eq 2 ] || die "not a git checkout: give VERSION (scripts/release.sh OUTDIR VERSION) and SOURCE_DATE_EPOCH"
	[ -n "${SOURCE_DATE_EPOCH:-}" ] || die "not a git checkout: set SOURCE_DATE_EPOCH (Unix seconds of the source's last change)"
	commit_epoch=$SOURCE_DATE_EPOCH
	version=$2
fi
[[ $version =~ ^v?[0-9A-Za-z][0-9A-Za-z.+~-]*$ ]] || die "VERSION \"$version\": want letters, digits and . + ~ - only (e.g. v1.2.3)"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$commit_epoch}
[[ $SOURCE_DATE_EPOCH =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH \"$SOURCE_DATE_EPOCH\": want Unix seconds"
commit_time=$(date -u -d "@$commit_epoch" +%Y-%m-%dT%H:%M:%SZ)

# The package version: what dpkg and rpm compare (see the header).
pkgver=${version#v}
if [[ $pkgver =~ ^[0-9]+\.[0-9]+ ]]; then
	pkgver=$(sed -E -e 's/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/' -e 's/-dirty$/.dirty/' -e 's/-/~/g' <<<"$pkgver")
else
	pkgver=0.0.0~git.$(sed -e 's/-dirty$/.dirty/' -e 's/-/./g' <<<"$pkgver")
fi

arches=${RELEASE_ARCHES-amd64 arm64}
packages=${RELEASE_PACKAGES-deb rpm}
for a in $arches; do
	case $a in amd64 | arm64) ;; *) die "RELEASE_ARCHES: \"$a\" is not amd64 or arm64" ;; esac
done
for p in $packages; do
	case $p in deb | rpm) ;; *) die "RELEASE_PACKAGES: \"$p\" is not deb or rpm" ;; esac
done

work=$(mktemp -d /tmp/idmint-release.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "release.sh: idmint $version (package $pkgver), commit ${commit:-unknown} of $commit_time, into $out" >&2

# The packaged unit: deploy/systemd/idmint.service (checked by deploy's
# tests) with the package's paths: the binary in /usr/bin, the idmint user
# the package creates instead of a dynamic one (it owns /var/lib/idmint,
# mode 0750, across upgrades), and without the manual-install notes.
unit=$work/idmint.service
{
	echo "# idmint as a hardened systemd service, installed by the idmint package."
	echo "# Settings: /etc/idmint/idmint.yaml; secrets (IDMINT_ADMIN_TOKEN): /etc/idmint/idmint.env,"
	echo "# mode 0600 (example: /usr/share/doc/idmint/idmint.env.example). Then:"
	echo "#   systemctl enable --now idmint"
	sed -n '/^\[Unit\]/,$p' deploy/systemd/idmint.service |
		sed -e 's#^ExecStart=/usr/local/bin/idmint #ExecStart=/usr/bin/idmint #' \
			-e 's#^DynamicUser=yes$#User=idmint\nGroup=idmint#' \
			-e 's#^StateDirectoryMode=0700$#StateDirectoryMode=0750#'
} >"$unit"
for want in '^ExecStart=/usr/bin/idmint serve ' '^User=idmint$' '^Group=idmint$' '^StateDirectoryMode=0750$' '^StateDirectory=idmint$'; do
	grep -q "$want" "$unit" || die "the packaged unit lacks $want: deploy/systemd/idmint.service changed; adapt release.sh"
done
! grep -q 'DynamicUser' "$unit" || die "the packaged unit still has DynamicUser"

# The SBOM writer and the packager, built once.
go build -o "$work/sbom" ./scripts/sbom
if [ -n "$packages" ]; then
	(cd tools/release && go build -o "$work/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm)
fi

for arch in $arches; do
	bin=$out/idmint-$version-linux-$arch
	echo "release.sh: building $bin" >&2
	# GOAMD64 and GOARM64 pinned to their defaults, so a builder's
	# environment cannot change the code. -buildvcs=false: the stamp
	# below says all Go's VCS stamp would, without depending on untracked
	# files (its vcs.modified counts them) or on the kind of checkout.
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 \
		go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$version -X main.commit=$commit -X main.commitTime=$commit_time -X main.modified=$modified" \
		-o "$bin" ./cmd/idmint
	"$work/sbom" -created "$SOURCE_DATE_EPOCH" -version "$version" "$bin" >"$bin.spdx.json"
	for p in $packages; do
		echo "release.sh: packaging $p for $arch" >&2
		ARCH=$arch VERSION=$pkgver BIN=$bin UNIT=$unit \
			"$work/nfpm" package --config deploy/packaging/nfpm.yaml --packager "$p" --target "$out/" >&2
	done
done

(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "release.sh: done:" >&2
(cd "$out" && ls -l) >&2
