/**
 * Live apply for systemd-networkd, and for netplan rendering to it. Found on booted Debian 12 (systemd 252, the
 * harness of test/boot/network.test.ts):
 *
 * - `networkctl reload` reads every .network again and reconfigures exactly the links whose file (or drop-in)
 *   changed on disk, by inode and mtime. A new secondary's link, down and unmanaged until then, is brought up and
 *   leases its address; a link whose bootstate file was removed loses its addresses and routes (unmanaged, up).
 *   A link whose files did not change is not touched: eth0 kept its lease while eth1's file was added.
 * - A reconfigured link first drops what it had: with eth0's .network changed (a drop-in adding an Address= and a
 *   RouteMetric=), reload deleted eth0's leased 10.77.0.10 and its routes, then sent a fresh DISCOVER and got it back
 *   40 ms later (an SSH session survived on retransmits; a DHCP server slower than that would leave eth0 without an
 *   address). With KeepConfiguration=dhcp in the running .network, a later change kept the DHCPv4 address (not the
 *   DHCPv6 one). So the primary's file is written only after the reload (apply.ts writeAndApply) and its
 *   addresses are added live by `ip` (apply-common.ts).
 * - Until then eth0 runs the image's .network with bootstate's file on disk beside it: anyone's later `networkctl
 *   reload` moves it to bootstate's file, with one drop and re-lease as above; a restart of networkd (or the next
 *   boot) starts it on bootstate's file directly and keeps the lease, provided the live addresses carry the
 *   broadcast networkd sets (apply-common.ts: without it that start failed eth0 with ERANGE).
 * - `networkctl reconfigure` is needed only when reload did not pick up a written file (an older networkd, or a
 *   file networkd does not match): the link's `Network File:` in `networkctl status` tells.
 *
 * netplan: `netplan generate` rewrites every file it generates under /run/systemd/network, so the primary's would
 * count as changed and reload would drop its lease: generate renders into a scratch root and only the secondary
 * interfaces' generated files are copied over (see apply-netplan.ts).
 */
import { attempt, Outcome, query } from './apply-common.js';
import type { ApplyDeps, BoundNic, BoundPlan, FileChange } from './types.js';

/** How long secondaries get to reach `configured` after the reload before each that has not is a warning. */
export const SETTLE_MS = 20_000;

/** `networkctl reload`, `reconfigure` where the reload did not take, then waits for the secondaries to settle. */
export async function reloadNetworkd(plan: BoundPlan, change: FileChange | null, deps: ApplyDeps, outcome: Outcome, settleMs = SETTLE_MS): Promise<void> {
  const secondaries = plan.nics.filter((nic) => !nic.primary);
  // netplan (change null): networkd's files are netplan's generated ones, not what was written; reload alone then.
  const touched = secondaries.filter((nic) => change?.written.some((file) => file.interfaces.includes(nic.name)));
  const failed = await attempt(deps, ['networkctl', 'reload']);
  if (failed) {
    for (const nic of secondaries) outcome.warn(nic.name, failed);
    return;
  }
  for (const nic of touched) {
    const file = change!.written.find((f) => f.interfaces.includes(nic.name))!.path;
    const status = await query(deps, ['networkctl', 'status', '--no-pager', nic.name]);
    if (status?.match(/Network File: (\S+)/)?.[1] === file) continue;
    const again = await attempt(deps, ['networkctl', 'reconfigure', nic.name]);
    if (again) outcome.warn(nic.name, again);
  }
  await settle(secondaries, deps, outcome, settleMs);
}

/** Polls `networkctl list` until every secondary is configured (applied) or failed; whatever is left is a warning. */
async function settle(nics: BoundNic[], deps: ApplyDeps, outcome: Outcome, settleMs: number): Promise<void> {
  const waiting = new Set(nics.map((nic) => nic.name));
  const deadline = Date.now() + settleMs;
  let last = new Map<string, string>();
  while (waiting.size > 0) {
    last = setupStates((await query(deps, ['networkctl', 'list', '--no-pager', '--no-legend'])) ?? '');
    for (const name of [...waiting]) {
      const state = last.get(name);
      if (state === 'configured') outcome.applied(name);
      else if (state === 'failed' || state === 'linger') outcome.warn(name, `systemd-networkd left ${name} ${state}`);
      else continue;
      waiting.delete(name);
    }
    if (waiting.size === 0 || Date.now() > deadline || deps.signal?.aborted) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  for (const name of waiting) outcome.warn(name, `systemd-networkd did not configure ${name} within ${settleMs / 1000} s (setup: ${last.get(name) ?? 'no such link'})`);
}

/** `networkctl list`'s SETUP column by link name. */
export function setupStates(list: string): Map<string, string> {
  const states = new Map<string, string>();
  for (const line of list.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields.length >= 5 && /^\d+$/.test(fields[0]!)) states.set(fields[1]!, fields[4]!);
  }
  return states;
}
