/**
 * Live apply for ifupdown (with ISC dhclient). Found on booted Debian 12 (ifupdown 0.8.41, the harness of
 * test/boot/network.test.ts):
 *
 * - `ifup eth1` for a new stanza brings eth1 up and leases its address; eth0 is not touched. `ifup` of an interface
 *   already up prints "already configured" and exits 0, so it is safe on every boot (an `allow-hotplug` stanza is
 *   brought up by udev, which a container has not).
 * - `ifdown` reads the interface's stanza: run after the stanza is gone, it says "ignoring unknown interface", exits
 *   0, forgets the interface's state, and leaves its address and its dhclient running; a later ifdown then finds
 *   nothing to do and the dhclient is orphaned. So a changed or removed secondary's ifdown runs before the writer
 *   replaces or removes its file (the writer's beforeChange hook: `ifdownBefore`), and ifup after.
 * - With the stanza there, ifdown releases the lease (DHCPRELEASE), stops dhclient and sets the link down.
 * - The primary is never taken down: `ifup eth0` with a new static stanza beside the image's `inet dhcp` only says
 *   "already configured", so its secondary addresses are added with `ip addr add` (apply-common.ts). An ifupdown
 *   `inet6 dhcp` stanza runs `dhclient -6 -pf /run/dhclient6.eth0.pid -lf /var/lib/dhcp/dhclient6.eth0.leases -I
 *   -df /var/lib/dhcp/dhclient.eth0.leases eth0` (ifup -n -v): the primary's DHCPv6 starts live the same way, in
 *   the background, so a later `ifdown eth0` finds and releases it.
 * - What ifup starts (dhclient) runs in a transient unit of its own (systemd-run), never in the step's unit, whose
 *   stop or restart would otherwise kill it.
 * - Stanzas in interfaces.d sourced at the top of /etc/network/interfaces come first: at boot a static address of
 *   bootstate's for eth0 is added before the image's `inet dhcp` one, and is the primary address of the subnet.
 */
import { applyPrimaryLive, attempt, liveAddresses, Outcome, query } from './apply-common.js';
import type { Address, ApplyDeps, BoundNic, BoundPlan, FileChange } from './types.js';

/** The interfaces a stanza file names (`iface eth1 inet dhcp`, `auto eth1`, `allow-hotplug eth1`). */
export function stanzaInterfaces(text: string): string[] {
  const names = [...text.matchAll(/^\s*(?:iface|auto|allow-[\w-]+)\s+(.+)$/gm)].flatMap((m) =>
    m[0]!.trim().startsWith('iface') ? [m[1]!.split(/\s+/)[0]!] : m[1]!.split(/\s+/),
  );
  return [...new Set(names.filter(Boolean))];
}

/**
 * The writer's beforeChange for ifupdown: takes down each interface an earlier file of bootstate's configures, while
 * its old stanza is still on disk, if ifupdown has it up. The primary is never taken down.
 */
export function ifdownBefore(plan: BoundPlan, deps: ApplyDeps, outcome: Outcome): (file: string, previous: string) => Promise<void> {
  const primary = new Set(plan.nics.filter((nic) => nic.primary).map((nic) => nic.name));
  return async (_file, previous) => {
    const up = await ifupdownUp(deps);
    for (const name of stanzaInterfaces(previous)) {
      if (primary.has(name) || name === 'lo' || !up.has(name)) continue;
      const failed = await attempt(deps, ['ifdown', name]);
      if (failed) outcome.warn(name, failed);
      await attempt(deps, ['systemctl', 'stop', ifupUnit(name)]);
    }
  };
}

/**
 * `ifup` for every secondary whose file was written, and for every other one that has a stanza but is not up (an
 * `allow-hotplug` one at a boot without udev); then the primary's live additions.
 */
export async function applyIfupdown(plan: BoundPlan, change: FileChange, deps: ApplyDeps, outcome: Outcome, stale: Address[] = []): Promise<void> {
  const up = await ifupdownUp(deps);
  for (const nic of plan.nics.filter((n) => !n.primary)) {
    const written = change.written.some((f) => f.interfaces.includes(nic.name));
    if (!written && (up.has(nic.name) || (await query(deps, ['ifquery', nic.name])) === null)) continue;
    const failed = await ifupOutside(deps, nic.name);
    if (failed) outcome.warn(nic.name, failed);
    else outcome.applied(nic.name);
  }
  const primary = plan.nics.find((n) => n.primary);
  if (!primary) return;
  await applyPrimaryLive(primary, deps, outcome, stale);
  if (primary.dhcp6) await startPrimaryDhcp6(primary, deps, outcome);
}

/** The transient unit an interface's ifup (and so its dhclient) runs in. */
export const ifupUnit = (name: string) => `bootstate-ifup-${name}.service`;

/**
 * `ifup NAME` in a transient unit of its own that stays active (RemainAfterExit): the dhclient it starts lives
 * there, not in the cgroup of the step's own unit, whose stop would kill it and leave the lease to expire unrenewed.
 * Not Debian's ifup@.service: it binds to the interface's udev device unit (absent where no udev runs, as in a
 * container) and brings up `allow-hotplug` stanzas only. Without systemd-run (no systemd), plain `ifup`.
 */
export async function ifupOutside(deps: ApplyDeps, name: string): Promise<string | null> {
  const unit = ifupUnit(name);
  await attempt(deps, ['systemctl', 'stop', unit]);
  const argv = ['systemd-run', `--unit=${unit}`, '--collect', '--service-type=oneshot', '--property=RemainAfterExit=yes', '--quiet', 'ifup', name];
  const failed = await attempt(deps, argv, 90_000);
  if (failed && /systemd-run: (not found|.*ENOENT)|spawn/.test(failed)) return attempt(deps, ['ifup', name], 60_000);
  return failed;
}

/** The interfaces ifupdown has brought up (`ifquery --state`: `eth1=eth1` lines). */
async function ifupdownUp(deps: ApplyDeps): Promise<Set<string>> {
  const state = (await query(deps, ['ifquery', '--state'])) ?? '';
  return new Set(state.split('\n').map((line) => line.split('=')[0]!.trim()).filter(Boolean));
}

/**
 * Starts the primary's DHCPv6 client as ifupdown's `inet6 dhcp` would (in a transient unit, as ifup's), unless it
 * has a global IPv6 address already. ifupdown's renderer leaves an image's `inet dhcp` primary without an `inet6
 * dhcp` stanza, so this runs on every boot the plan asks for DHCPv6 on it.
 */
async function startPrimaryDhcp6(primary: BoundNic, deps: ApplyDeps, outcome: Outcome): Promise<void> {
  const addresses = (await liveAddresses(deps, primary.name)) ?? [];
  if (addresses.some((a) => a.cidr.includes(':'))) return;
  if ((await query(deps, ['pgrep', '-f', `dhclient -6 .*${primary.name}$`])) !== null) return;
  const name = primary.name;
  const unit = `bootstate-dhcp6-${name}.service`;
  await attempt(deps, ['systemctl', 'stop', unit]);
  const failed = await attempt(deps, [
    'systemd-run', `--unit=${unit}`, '--collect', '--service-type=oneshot', '--property=RemainAfterExit=yes', '--quiet',
    'dhclient', '-6', '-nw', '-pf', `/run/dhclient6.${name}.pid`, '-lf', `/var/lib/dhcp/dhclient6.${name}.leases`,
    '-I', '-df', `/var/lib/dhcp/dhclient.${name}.leases`, name,
  ]);
  if (failed) outcome.warn(name, failed);
}
