# RPM has no purge: an erase keeps /var/lib/bootstate (the provisioned markers: a reinstall must not provision the
# VM again) and the log; a changed /etc/bootstate/bootstate.toml is kept as .rpmsave. After an upgrade ($1 >= 1)
# a running monitor is restarted on the new binary.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ "$1" -ge 1 ]; then
        systemctl try-restart bootstate-monitor.service >/dev/null 2>&1 || true
    fi
fi
exit 0
