#!/bin/sh
# After the idmint package is unpacked (dpkg postinst; rpm %post): the
# system user and the data directory, then systemd told about the unit. A
# first install does not start the service (set the admin token in
# /etc/idmint/idmint.env first); an upgrade restarts it if it ran.
set -e

if ! getent group idmint >/dev/null; then
	groupadd --system idmint
fi
if ! getent passwd idmint >/dev/null; then
	useradd --system --gid idmint --home-dir /var/lib/idmint --no-create-home \
		--shell /usr/sbin/nologin --comment "idmint unique-ID server" idmint
fi
# The data directory holds the worker ID, its time horizon and the SQLite
# segment store: what keeps IDs unique across restarts. Kept on removal.
install -d -o idmint -g idmint -m 0750 /var/lib/idmint
install -d -o root -g root -m 0755 /etc/idmint

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	# dpkg: "configure" with the old version when upgrading; rpm: $1 > 1.
	upgrade=
	case "$1" in
	configure) [ -n "$2" ] && upgrade=1 ;;
	[0-9]*) [ "$1" -gt 1 ] && upgrade=1 ;;
	esac
	if [ -n "$upgrade" ]; then
		systemctl try-restart idmint.service >/dev/null 2>&1 || true
	else
		echo "idmint: set IDMINT_ADMIN_TOKEN in /etc/idmint/idmint.env, then: systemctl enable --now idmint"
	fi
fi
exit 0
