# On erase ($1 = 0): stops the monitor and the firewall's re-check before their binary goes away, removes the
# firewall's rules on a running system, and disables the units. An upgrade ($1 = 1) keeps them.
if [ "$1" -eq 0 ]; then
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        systemctl stop bootstate-monitor.timer bootstate-monitor.service bootstate-firewall-recheck.timer bootstate-firewall-recheck.service >/dev/null 2>&1 || true
        # The wireserver firewall's rules, while the binary that knows them is still there: only bootstate's own.
        /usr/bin/bootstate firewall remove >/dev/null 2>&1 || echo "bootstate: the wireserver firewall's rules could not be removed" >&2
    fi
    if command -v systemctl >/dev/null 2>&1; then
        systemctl --no-reload disable @ALL_UNITS@ >/dev/null 2>&1 || true
    fi
    for wants in /etc/systemd/system/*.wants; do
        for unit in @ALL_UNITS@; do
            rm -f "$wants/$unit"
        done
    done
fi
exit 0
