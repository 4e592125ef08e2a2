# Enables the first-boot, firewall and temporary disk units and the firewall's re-check timer on the first install
# ($1 = 1), so the next boot of an image built with it provisions the VM; an upgrade leaves the admin's choice alone.
# Runs inside the target root (rpm --root chroots), where systemctl may be absent: then the enable link is made
# directly.
link_into() {
    if [ ! -e "/etc/systemd/system/$1.wants/$2" ]; then
        mkdir -p "/etc/systemd/system/$1.wants"
        ln -sf "/usr/lib/systemd/system/$2" "/etc/systemd/system/$1.wants/$2"
    fi
}
if [ "$1" -eq 1 ]; then
    if command -v systemctl >/dev/null 2>&1; then
        systemctl --no-reload preset @ALL_UNITS@ >/dev/null 2>&1 || true
    fi
    # What `systemctl enable` does for WantedBy=multi-user.target and timers.target, when preset could not do it.
    for unit in @ENABLED_UNITS@; do
        link_into multi-user.target "$unit"
    done
    for timer in @ENABLED_TIMERS@; do
        link_into timers.target "$timer"
    done
fi
# Coexistence check: prints what would make two agents provision the VM; never fails the install.
if [ -x /usr/bin/bootstate ]; then
    /usr/bin/bootstate doctor --root / || echo "bootstate: fix the findings above before capturing the image" >&2
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # The wireserver firewall on a running system at once, and again after an upgrade (its rules may have changed).
    systemctl restart bootstate-firewall.service >/dev/null 2>&1 || true
    # Its re-check, where it is enabled.
    if systemctl --quiet is-enabled bootstate-firewall-recheck.timer 2>/dev/null; then
        systemctl start bootstate-firewall-recheck.timer >/dev/null 2>&1 || true
    fi
fi
exit 0
