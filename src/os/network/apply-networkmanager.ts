/**
 * Live apply for NetworkManager: `nmcli connection reload` makes it read the keyfiles again (a reload activates
 * nothing and deactivates nothing), then each secondary whose keyfile was written is brought up on its device with
 * `nmcli connection up` (a device already running another profile is switched to bootstate's). A removed keyfile's
 * profile disappears with the reload; a device that ran it is disconnected by NetworkManager. The primary is never
 * reapplied or re-activated: whether `device reapply` keeps a DHCP lease across an address change was not proven in
 * a boot here, so its secondary addresses are added with `ip addr add` (apply-common.ts) and its keyfile takes over at the
 * next boot. On booted Debian 12 (NetworkManager 1.42, test/boot/network.test.ts) the secondaries came up by their
 * profiles, a removed profile's NIC lost its address, NetworkManager left the addresses added to eth0 alone, and
 * eth0's lease was never deleted.
 */
import { applyPrimaryLive, attempt, Outcome } from './apply-common.js';
import type { Address, ApplyDeps, BoundPlan, FileChange } from './types.js';

/** The keyfile's `[connection] id=` (what nmcli names the profile by), or null when it has none. */
export function connectionId(text: string): string | null {
  const section = /^\[connection\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(text)?.[1] ?? '';
  return /^id=(.+)$/m.exec(section)?.[1]?.trim() ?? null;
}

/** `nmcli connection reload`, `connection up` for each written secondary, the primary's live additions. */
export async function applyNetworkManager(plan: BoundPlan, change: FileChange, deps: ApplyDeps, outcome: Outcome, stale: Address[] = []): Promise<void> {
  const secondaries = plan.nics.filter((nic) => !nic.primary);
  const failed = await attempt(deps, ['nmcli', 'connection', 'reload']);
  if (failed) {
    for (const nic of secondaries) outcome.warn(nic.name, failed);
  } else {
    for (const nic of secondaries) {
      const file = change.written.find((f) => f.interfaces.includes(nic.name));
      if (!file) continue;
      const id = connectionId(file.text);
      const why = id
        ? await attempt(deps, ['nmcli', '--wait', '30', 'connection', 'up', 'id', id, 'ifname', nic.name], 45_000)
        : `${file.path} names no connection id`;
      if (why) outcome.warn(nic.name, why);
      else outcome.applied(nic.name);
    }
  }
  const primary = plan.nics.find((nic) => nic.primary);
  if (primary) await applyPrimaryLive(primary, deps, outcome, stale);
}
