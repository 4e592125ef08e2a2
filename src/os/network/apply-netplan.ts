/**
 * Live apply for netplan rendering to systemd-networkd, without `netplan apply` (which restarts networkd and so
 * reconfigures every link, the primary with it) and without a plain `netplan generate`: netplan 0.106 (Debian 12)
 * rewrites every file it generates under /run/systemd/network, unchanged ones included (a new mtime), and
 * networkd's reload reconfigures a link whose file's mtime changed, dropping the primary's lease (apply-networkd.ts).
 *
 * So generate runs into a scratch root whose etc/, run/ and lib/netplan are links to the machine's, and only the
 * generated files that differ and do not match the primary NIC (by its name or MAC) are copied into
 * /run/systemd/network; netplan's generated files there that it no longer generates go, again never the primary's.
 * Then networkd's own reload does the rest. At the next boot netplan's generator writes the same files anyway.
 * netplan 0.106 turns `match: macaddress` into `PermanentMACAddress=`, which a veth (the booted harness's NICs) never
 * matches, having no permanent address: the booted test has no netplan VM; hv_netvsc's NICs have one.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { writeFileAtomic } from '../../system/atomic.js';
import { reloadNetworkd } from './apply-networkd.js';
import { attempt, Outcome } from './apply-common.js';
import type { ApplyDeps, BoundPlan } from './types.js';

export const GENERATED = '/run/systemd/network';

/** netplan generate into a scratch root, the secondaries' files copied live, then networkd's reload. */
export async function applyNetplan(plan: BoundPlan, deps: ApplyDeps, outcome: Outcome, live = GENERATED): Promise<void> {
  const secondaries = plan.nics.filter((nic) => !nic.primary);
  const scratch = await mkdtemp(path.join(tmpdir(), 'bootstate-netplan-'));
  try {
    for (const dir of ['etc', 'run', 'lib']) {
      await mkdir(path.join(scratch, dir));
      await symlink(`/${dir}/netplan`, path.join(scratch, dir, 'netplan'));
    }
    const failed = await attempt(deps, ['netplan', 'generate', '--root-dir', scratch]);
    if (failed) {
      for (const nic of secondaries) outcome.warn(nic.name, failed);
      return;
    }
    await copySecondaries(path.join(scratch, GENERATED), live, plan);
  } catch (error) {
    for (const nic of secondaries) outcome.warn(nic.name, `netplan's networkd files: ${error instanceof Error ? error.message : String(error)}`);
    return;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  await reloadNetworkd(plan, null, deps, outcome);
}

/** Copies netplan's generated files that changed, removes those it no longer makes; the primary's are never touched. */
export async function copySecondaries(generated: string, live: string, plan: BoundPlan): Promise<void> {
  const primary = plan.nics.find((nic) => nic.primary);
  const isPrimary = (text: string) =>
    primary !== undefined &&
    (new RegExp(`^Name=${primary.name}$`, 'm').test(text) || new RegExp(`^(?:Permanent)?MACAddress=${primary.mac}$`, 'im').test(text));
  const ours = (name: string) => /^10-netplan-.+\.(network|netdev|link)$/.test(name);
  const made = (await readdir(generated).catch(() => [] as string[])).filter(ours);
  for (const name of made) {
    const text = await readFile(path.join(generated, name), 'utf8');
    const now = await readFile(path.join(live, name), 'utf8').catch(() => null);
    if (now === text || isPrimary(text) || (now !== null && isPrimary(now))) continue;
    await writeFileAtomic(path.join(live, name), text, { mode: 0o644 });
  }
  for (const name of (await readdir(live).catch(() => [] as string[])).filter((n) => ours(n) && !made.includes(n))) {
    const now = await readFile(path.join(live, name), 'utf8').catch(() => '');
    if (!isPrimary(now)) await unlink(path.join(live, name));
  }
}
