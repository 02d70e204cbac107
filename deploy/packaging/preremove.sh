#!/bin/sh
# Before the idmint package's files are removed (dpkg prerm; rpm %preun):
# stop and disable the service when the package goes away for good. An
# upgrade leaves it running; postinstall restarts it on the new binary.
set -e

remove=
case "$1" in
remove | deconfigure) remove=1 ;; # dpkg
0) remove=1 ;;                    # rpm: no version left after this
esac
if [ -n "$remove" ] && [ -d /run/systemd/system ]; then
	systemctl disable --now idmint.service >/dev/null 2>&1 || true
fi
exit 0
