#!/bin/sh
# After the idmint package's files are removed (dpkg postrm; rpm %postun).
# The data directory /var/lib/idmint and the idmint user stay, even on
# dpkg --purge: the directory holds the worker ID, its time horizon and
# the segment store, and a fresh one can issue IDs the old one already
# issued. Remove them by hand once no ID from this host matters.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ] && [ -d /var/lib/idmint ]; then
	echo "idmint: kept /var/lib/idmint and the idmint user (remove them by hand: see /var/lib/idmint)"
fi
exit 0
