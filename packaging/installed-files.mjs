// What the packages install, one entry a file: the .deb (scripts/build/deb.mjs) and the .rpm (scripts/build/rpm.mjs)
// both place exactly these, so the two cannot drift. An entry is a path in the installed system, its mode, and where
// its bytes come from: `from` a file of this repository, `text` as written here, or `made` by the build
// (`executable`: dist/bootstate; `default-config`: packaging/default-config.ts rendered; `packaged-firewall`: the
// firewall's nft rules for that configuration, rendered by the same file; `changelog-gz`: the Debian
// changelog, gzipped). `config`: the administrator's file, kept over upgrades (dpkg conffile, rpm %config(noreplace)).
// `only`: one package format's own convention (Debian's changelog and lintian overrides; RPM's license directory).
// Adding a file: one line here; the package tests compare both packages against this list.
export const INSTALLED_FILES = [
  { path: 'usr/bin/bootstate', mode: 0o755, made: 'executable' },
  { path: 'usr/lib/systemd/system/bootstate.service', mode: 0o644, from: 'packaging/systemd/bootstate.service' },
  { path: 'usr/lib/systemd/system/bootstate-monitor.service', mode: 0o644, from: 'packaging/systemd/bootstate-monitor.service' },
  { path: 'usr/lib/systemd/system/bootstate-monitor.timer', mode: 0o644, from: 'packaging/systemd/bootstate-monitor.timer' },
  { path: 'usr/libexec/bootstate/firewall-recheck', mode: 0o755, from: 'packaging/libexec/firewall-recheck' },
  { path: 'usr/libexec/bootstate/firewall-load', mode: 0o755, from: 'packaging/libexec/firewall-load' },
  { path: 'usr/share/bootstate/firewall.nft', mode: 0o644, made: 'packaged-firewall' },
  { path: 'usr/lib/systemd/system/bootstate-firewall.service', mode: 0o644, from: 'packaging/systemd/bootstate-firewall.service' },
  { path: 'usr/lib/systemd/system/bootstate-firewall-recheck.service', mode: 0o644, from: 'packaging/systemd/bootstate-firewall-recheck.service' },
  { path: 'usr/lib/systemd/system/bootstate-firewall-recheck.timer', mode: 0o644, from: 'packaging/systemd/bootstate-firewall-recheck.timer' },
  { path: 'usr/lib/systemd/system/bootstate-resource-disk.service', mode: 0o644, from: 'packaging/systemd/bootstate-resource-disk.service' },
  { path: 'usr/lib/systemd/system/bootstate-network.service', mode: 0o644, from: 'packaging/systemd/bootstate-network.service' },
  { path: 'usr/lib/udev/rules.d/66-bootstate-resource-disk.rules', mode: 0o644, from: 'packaging/udev/66-bootstate-resource-disk.rules' },
  // WALinuxAgent's unit is walinuxagent.service on Debian and Ubuntu, waagent.service on RHEL, SUSE and upstream.
  { path: 'usr/lib/systemd/system/walinuxagent.service.d/50-bootstate.conf', mode: 0o644, from: 'packaging/systemd/waagent-gate.conf' },
  { path: 'usr/lib/systemd/system/waagent.service.d/50-bootstate.conf', mode: 0o644, from: 'packaging/systemd/waagent-gate.conf' },
  { path: 'usr/lib/systemd/system-preset/90-bootstate.preset', mode: 0o644, text: 'enable bootstate.service\nenable bootstate-firewall.service\nenable bootstate-firewall-recheck.timer\nenable bootstate-resource-disk.service\nenable bootstate-network.service\ndisable bootstate-monitor.timer\n' },
  { path: 'etc/bootstate/bootstate.toml', mode: 0o644, made: 'default-config', config: true },
  { path: 'usr/share/doc/bootstate/copyright', mode: 0o644, from: 'packaging/debian/copyright', only: 'deb' },
  { path: 'usr/share/doc/bootstate/changelog.gz', mode: 0o644, made: 'changelog-gz', only: 'deb' },
  { path: 'usr/share/lintian/overrides/bootstate', mode: 0o644, from: 'packaging/debian/lintian-overrides', only: 'deb' },
  { path: 'usr/share/licenses/bootstate/copyright', mode: 0o644, from: 'packaging/debian/copyright', only: 'rpm' },
];

/** Where bootstate-node (the .deb run by the distribution's nodejs) puts the plain program; /usr/bin/bootstate links it. */
export const NODE_PROGRAM_DIR = 'usr/lib/bootstate';

/** The units the packages enable on a first install (WantedBy=multi-user.target) and stop/disable on removal. */
export const ENABLED_UNITS = ['bootstate.service', 'bootstate-firewall.service', 'bootstate-resource-disk.service', 'bootstate-network.service'];
/** The timers the packages enable on a first install (WantedBy=timers.target). */
export const ENABLED_TIMERS = ['bootstate-firewall-recheck.timer'];
export const ALL_UNITS = [
  'bootstate.service',
  'bootstate-monitor.timer',
  'bootstate-monitor.service',
  'bootstate-firewall.service',
  'bootstate-firewall-recheck.timer',
  'bootstate-firewall-recheck.service',
  'bootstate-resource-disk.service',
  'bootstate-network.service',
];

/** The entries of one package format (`deb` or `rpm`). */
export const filesFor = (format) => INSTALLED_FILES.filter((file) => file.only === undefined || file.only === format);
