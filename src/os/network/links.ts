/**
 * The machine's network interfaces as the kernel shows them, and the plan bound to them. With accelerated
 * networking an SR-IOV virtual function (mlx4_*, mlx5_core, mana) carries its synthetic NIC's MAC and is enslaved to
 * it: a NIC is matched by MAC *and* driver, and lands only on the one interface with a synthetic driver and no master.
 * Every other interface with a planned MAC is a virtual function, listed so that no backend ever configures it.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import type { Runner } from '../../system/exec.js';
import type { BoundNic, BoundPlan, Link, NetworkPlan, NicPlan } from './types.js';

export interface ReadLinksOptions {
  /** A sysfs's class/net mounted in the network namespace whose interfaces are wanted; default /sys/class/net. */
  sysClassNet?: string;
  /** Runs `ip -j -d link show` in that same namespace (the link kind of interfaces without a device driver). */
  run: Runner;
}

const MAC = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/;
const NO_MAC = '00:00:00:00:00:00';
const LISTED = 16;

/**
 * The interfaces with a MAC, sorted by name, `lo` left out: e.g. `{ name: 'eth0', mac: '00:0d:3a:1b:2c:3d', driver:
 * 'hv_netvsc', master: null }` and its VF `{ name: 'enP1s1', …, driver: 'mlx5_core', master: 'eth0' }`. The driver is
 * the device's driver in sysfs, else the rtnetlink link kind (veth, dummy, bridge…), else null.
 */
export async function readLinks(options: ReadLinksOptions): Promise<Link[]> {
  const root = options.sysClassNet ?? '/sys/class/net';
  const names = (await readdir(root)).filter((name) => name !== 'lo').sort();
  const kernel = await rtnetlinkLinks(options.run);
  const links: Link[] = [];
  for (const name of names) {
    const dir = path.join(root, name);
    const mac = await macOfLink(dir);
    if (mac === null) continue;
    const driver = (await targetName(path.join(dir, 'device', 'driver'))) ?? kernel.get(name)?.kind ?? null;
    const master = (await targetName(path.join(dir, 'master'))) ?? kernel.get(name)?.master ?? null;
    links.push({ name, mac, driver, master });
  }
  return links;
}

/** The link kind and master of each interface as `ip -j -d link show` has them; empty when ip cannot tell. */
async function rtnetlinkLinks(run: Runner): Promise<Map<string, { kind: string | null; master: string | null }>> {
  const found = new Map<string, { kind: string | null; master: string | null }>();
  let parsed: unknown;
  try {
    const result = await run(['ip', '-j', '-d', 'link', 'show'], { allowFailure: true, timeoutMs: 10_000 });
    if (result.exitCode !== 0) return found;
    parsed = JSON.parse(result.stdout);
  } catch {
    // No ip, or output that is not JSON: sysfs alone tells the drivers of real devices, the others stay null.
    return found;
  }
  if (!Array.isArray(parsed)) return found;
  for (const entry of parsed as unknown[]) {
    const { ifname, master, linkinfo } = (entry ?? {}) as { ifname?: unknown; master?: unknown; linkinfo?: { info_kind?: unknown } };
    if (typeof ifname !== 'string') continue;
    const kind = linkinfo?.info_kind;
    found.set(ifname, { kind: typeof kind === 'string' ? kind : null, master: typeof master === 'string' ? master : null });
  }
  return found;
}

/** /sys/class/net/<name>/address as `aa:bb:…`; null for none, all zeros, or another length (InfiniBand). */
async function macOfLink(dir: string): Promise<string | null> {
  try {
    const mac = (await readFile(path.join(dir, 'address'), 'utf8')).trim().toLowerCase();
    return MAC.test(mac) && mac !== NO_MAC ? mac : null;
  } catch {
    return null;
  }
}

/** The last component of a symlink's target (a driver's or a master's name), or null when there is no such link. */
async function targetName(link: string): Promise<string | null> {
  try {
    return path.basename(await readlink(link)) || null;
  } catch {
    return null;
  }
}

/**
 * Each NIC of `plan` on the one interface with its MAC, a driver in `drivers` and no master; the NIC is unbound, with
 * why, when there is none or more than one. The other interfaces with a planned MAC are `virtualFunctions`.
 */
export function bindPlan(plan: NetworkPlan, links: Link[], drivers: readonly string[]): BoundPlan {
  const wanted = new Set(drivers);
  const usable = (link: Link) => link.driver !== null && wanted.has(link.driver) && link.master === null;
  const bound: BoundNic[] = [];
  const unbound: BoundPlan['unbound'] = [];
  const taken = new Map<string, number>();
  for (const nic of plan.nics) {
    const mac = nic.mac.toLowerCase();
    const same = links.filter((link) => link.mac.toLowerCase() === mac);
    const candidates = same.filter(usable);
    const only = candidates.length === 1 ? candidates[0]! : null;
    if (only && !taken.has(only.name)) {
      taken.set(only.name, nic.index);
      bound.push({ ...nic, name: only.name, driver: only.driver! });
    } else {
      unbound.push({ nic, why: whyUnbound(nic, { links, same, candidates, drivers, taken }) });
    }
  }
  const planned = new Set(plan.nics.map((nic) => nic.mac.toLowerCase()));
  const virtualFunctions = links.filter((link) => planned.has(link.mac.toLowerCase()) && !usable(link));
  return { nics: bound, unbound, virtualFunctions };
}

interface Seen {
  links: Link[];
  same: Link[];
  candidates: Link[];
  drivers: readonly string[];
  taken: ReadonlyMap<string, number>;
}

function whyUnbound(nic: NicPlan, seen: Seen): string {
  const mac = nic.mac.toLowerCase();
  const wanted = `a driver of ${seen.drivers.join(', ') || '(none configured)'} and no master`;
  if (seen.same.length === 0) {
    return `no interface has MAC ${mac}; interfaces seen: ${describe(seen.links, true)}`;
  }
  if (seen.candidates.length === 0) {
    return `no interface with MAC ${mac} has ${wanted}: ${describe(seen.same, false)}`;
  }
  if (seen.candidates.length > 1) {
    return `ambiguous: ${seen.candidates.length} interfaces with MAC ${mac} have ${wanted}: ${describe(seen.candidates, false)}`;
  }
  const name = seen.candidates[0]!.name;
  return `its interface ${name} is already NIC ${seen.taken.get(name)}'s (the plan lists MAC ${mac} twice)`;
}

/** `eth0 (hv_netvsc), enP1s1 (mlx5_core, enslaved to eth0)`, the first 16. */
function describe(links: Link[], withMac: boolean): string {
  if (links.length === 0) return 'none';
  const shown = links.slice(0, LISTED).map((link) => {
    const details = [withMac ? link.mac : null, link.driver ?? 'no driver', link.master ? `enslaved to ${link.master}` : null];
    return `${link.name} (${details.filter((d) => d !== null).join(', ')})`;
  });
  const more = links.length > LISTED ? ` and ${links.length - LISTED} more` : '';
  return `${shown.join(', ')}${more}`;
}
