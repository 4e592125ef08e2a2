# RPM has no purge: an erase keeps /var/lib/bootstate (the provisioned markers: a reinstall must not provision the
# VM again) and the log; a changed /etc/bootstate/bootstate.toml is kept as .rpmsave. After an upgrade the monitor's
# timer starts its next cycle on the new binary: nothing is resident to restart.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
