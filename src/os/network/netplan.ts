/**
 * The netplan backend's renderer and image reader: one file for all NICs, /etc/netplan/90-bootstate.yaml, mode 0600
 * (netplan warns about world-readable configuration). Each NIC is a definition with the ID `0-bootstate-<ifname>`
 * matched by `macaddress` and `driver` (no `set-name`: the interface keeps the name the image gave it), DHCPv4 with
 * the plan's route metric, DNS from DHCP on the primary only, DHCPv6 when the plan asks, the other addresses static.
 *
 * Coexistence with the image's own YAML: an image definition of the same interface is a separate definition (IDs
 * differ), so netplan renders both; networkd then takes the definitions in the lexical order of netplan's generated
 * `10-netplan-<ID>.network` files. The ID `0-bootstate-…` sorts before the IDs images use (`eth0`, `all-eth`,
 * `all-en`, cloud-init's names), so on an interface the image configures compatibly (DHCPv4, no static address)
 * bootstate's definition wins and the image's file stays as it was. An image definition that configures the
 * interface differently (static `addresses`, DHCPv4 off) or whose ID sorts first is a conflict: reported, and the
 * interface left out of bootstate's file. netplan 0.106 refuses `match: driver` in a definition rendered for
 * NetworkManager (the whole file fails), and without the driver bootstate cannot tell a NIC from its SR-IOV virtual
 * function: so on an image whose netplan renders for NetworkManager every interface is a conflict, and detection
 * (detect.ts) picks the NetworkManager stack for such an image instead. `route-metric` is the same in the DHCPv4 and
 * DHCPv6 overrides because netplan's networkd renderer refuses them different. Secondary NICs are `optional`, so one
 * that does not come up does not hold the boot in systemd-networkd-wait-online.
 */
import type { BoundNic, BoundPlan, ImageConflict, RenderedFile } from './types.js';
import { HEADER, globMatch, listDir, normalMac, readText, rendered, staticCidrs } from './common.js';
import { parseYamlSubset } from './yaml-subset.js';
import type { YamlValue } from './yaml-subset.js';

export const NETPLAN_FILE = '/etc/netplan/90-bootstate.yaml';
/** Where netplan reads YAML, highest precedence first (a same-named file masks the later ones). */
export const NETPLAN_DIRS = ['/etc/netplan', '/run/netplan', '/lib/netplan'];

export function netplanId(ifname: string): string {
  return `0-bootstate-${ifname}`;
}

function overrides(key: string, nic: BoundNic): string[] {
  const lines = [`      ${key}:`, `        route-metric: ${nic.metric}`];
  if (!nic.useDns) lines.push('        use-dns: false');
  return lines;
}

function netplanNic(nic: BoundNic): string[] {
  const lines = [
    `    ${netplanId(nic.name)}:`,
    '      match:',
    `        macaddress: "${nic.mac}"`,
    `        driver: "${nic.driver}"`,
    '      dhcp4: true',
    ...overrides('dhcp4-overrides', nic),
  ];
  if (nic.dhcp6) lines.push('      dhcp6: true', ...overrides('dhcp6-overrides', nic));
  const cidrs = staticCidrs(nic);
  if (cidrs.length > 0) lines.push('      addresses:', ...cidrs.map((c) => `        - "${c}"`));
  if (!nic.primary) lines.push('      optional: true');
  return lines;
}

/** Pure: the one YAML file for every NIC of the plan not in `skip`; none when all are skipped. */
export function renderNetplan(plan: BoundPlan, skip: ReadonlySet<string>): RenderedFile[] {
  const nics = rendered(plan, skip);
  if (nics.length === 0) return [];
  const lines = [...HEADER, 'network:', '  version: 2', '  ethernets:', ...nics.flatMap(netplanNic)];
  return [{ path: NETPLAN_FILE, text: `${lines.join('\n')}\n`, mode: 0o600, interfaces: nics.map((n) => n.name) }];
}

export async function netplanOwnedFiles(root: string): Promise<string[]> {
  return (await readText(root, NETPLAN_FILE)) === null ? [] : [NETPLAN_FILE];
}

function asMap(v: YamlValue | undefined): Record<string, YamlValue> {
  return v !== undefined && typeof v === 'object' && !Array.isArray(v) ? v : {};
}

function asList(v: YamlValue | undefined): string[] {
  if (v === undefined || v === '') return [];
  return (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
}

/** Whether a netplan definition selects this NIC: by its `match` (every key given), else by its ID as the name. */
export function netplanMatches(id: string, def: Record<string, YamlValue>, nic: BoundNic): boolean {
  if (def.match === undefined) return id === nic.name;
  const match = asMap(def.match);
  const name = asList(match.name);
  const mac = asList(match.macaddress);
  const driver = asList(match.driver);
  return (
    name.every((g) => globMatch(g, nic.name)) &&
    mac.every((m) => normalMac(m) === nic.mac) &&
    (driver.length === 0 || driver.some((g) => globMatch(g, nic.driver)))
  );
}

function netplanDifference(def: Record<string, YamlValue>): string | null {
  const addresses = asList(def.addresses);
  if (addresses.length > 0) return `it sets static address ${addresses.join(', ')}`;
  if (!['true', 'yes', 'on', 'y'].includes((asList(def.dhcp4)[0] ?? 'false').toLowerCase())) return 'it leaves DHCPv4 off';
  return null;
}

/** The image's YAML files (bootstate's left out) in netplan's order: by name, a name in /etc masking /run and /lib. */
async function imageFiles(root: string): Promise<Array<{ path: string; doc: Record<string, YamlValue> }>> {
  const files = new Map<string, string>();
  for (const dir of NETPLAN_DIRS) {
    for (const name of await listDir(root, dir)) {
      if (/\.ya?ml$/.test(name) && !files.has(name)) files.set(name, `${dir}/${name}`);
    }
  }
  const out = [];
  for (const name of [...files.keys()].sort()) {
    const path = files.get(name)!;
    if (path !== NETPLAN_FILE) out.push({ path, doc: asMap(parseYamlSubset((await readText(root, path)) ?? '')) });
  }
  return out;
}

/** The image's definitions (ID, definition, file). */
async function imageDefinitions(root: string): Promise<Array<{ id: string; def: Record<string, YamlValue>; file: string }>> {
  const defs = [];
  for (const { path, doc } of await imageFiles(root)) {
    const ethernets = asMap(asMap(doc.network).ethernets);
    for (const [id, def] of Object.entries(ethernets)) defs.push({ id, def: asMap(def), file: path });
  }
  return defs;
}

/** The renderer netplan uses for the image: the last file's `network.renderer`, networkd when none says. */
export async function netplanRenderer(root: string): Promise<{ renderer: string; file: string | null }> {
  let found: { renderer: string; file: string | null } = { renderer: 'networkd', file: null };
  for (const { path, doc } of await imageFiles(root)) {
    const renderer = asList(asMap(doc.network).renderer)[0];
    if (renderer) found = { renderer, file: path };
  }
  return found;
}

/** The image's netplan definitions of a planned interface that differ from the plan or would be applied first. */
export async function netplanConflicts(root: string, plan: BoundPlan): Promise<ImageConflict[]> {
  const { renderer, file: rendererFile } = await netplanRenderer(root);
  if (renderer !== 'networkd') {
    const why = `netplan renders for ${renderer} here, and netplan refuses to match a ${renderer} definition by driver`;
    return plan.nics.map((nic) => ({ interface: nic.name, file: rendererFile ?? NETPLAN_DIRS[0]!, why }));
  }
  const defs = await imageDefinitions(root);
  const conflicts: ImageConflict[] = [];
  for (const nic of plan.nics) {
    for (const { id, def, file } of defs.filter((d) => netplanMatches(d.id, d.def, nic))) {
      const difference = netplanDifference(def);
      const why =
        difference ?? (id < netplanId(nic.name) ? `its ID ${id} sorts before ${netplanId(nic.name)}, so it would be applied first` : null);
      if (why !== null) conflicts.push({ interface: nic.name, file, why: `${why} (netplan ID ${id})` });
    }
  }
  return conflicts;
}
