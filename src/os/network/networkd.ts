/**
 * The systemd-networkd backend's renderer and image reader: one `.network` file per NIC,
 * /etc/systemd/network/10-bootstate-<ifname>.network (mode 0644), matched by MAC *and* driver so the SR-IOV virtual
 * function with the same MAC is never configured.
 *
 * Coexistence with the image's own files: networkd applies to a link the first matching `.network` file in lexical
 * order of file names across /etc, /run and /usr/lib (a same-named file in /etc masks the others). `10-bootstate-`
 * sorts before netplan's generated `10-netplan-*`, cloud-init's `10-cloud-init-*` and the usual `50-`…`99-` catch-alls,
 * so on an interface the image configures compatibly (DHCPv4, no static address) bootstate's file wins and the
 * image's stays untouched. An image file that would win instead (it sorts first) or that configures the interface
 * differently (a static `Address=`, an `[Address]` section, DHCPv4 off) is a conflict: reported, never overridden.
 *
 * The primary NIC keeps DHCP as the image had it, plus `KeepConfiguration=dhcp-on-stop` (a networkd restart leaves
 * its lease's address and routes in place) and `SendRelease=no` (stopping the DHCP client, as a reconfigure does,
 * does not give the lease back; [DHCPv6] has no `SendRelease=` in systemd 252, Debian 12's): the primary's address is what bootstate itself talks to the fabric through, so
 * nothing this file changes may take it away even for a moment. Not `KeepConfiguration=dhcp`, which would also keep
 * an expired lease's address against the DHCP rules. Secondary NICs get `RequiredForOnline=no` so one that does
 * not come up does not hold systemd-networkd-wait-online (and the boot) for its two minutes.
 */
import type { BoundNic, BoundPlan, ImageConflict, RenderedFile } from './types.js';
import { HEADER, globMatch, iniValues, listDir, normalMac, parseIni, readText, rendered, staticCidrs } from './common.js';
import type { Ini } from './common.js';

export const NETWORKD_DIR = '/etc/systemd/network';
/** Where networkd reads `.network` files, highest precedence first. */
export const NETWORKD_DIRS = [
  '/etc/systemd/network',
  '/run/systemd/network',
  '/usr/local/lib/systemd/network',
  '/usr/lib/systemd/network',
  '/lib/systemd/network',
];
const PREFIX = '10-bootstate-';

export function networkdFileName(ifname: string): string {
  return `${PREFIX}${ifname}.network`;
}

function networkdText(nic: BoundNic): string {
  const lines = [...HEADER, '', '[Match]', `MACAddress=${nic.mac}`, `Driver=${nic.driver}`, ''];
  if (!nic.primary) lines.push('[Link]', 'RequiredForOnline=no', '');
  lines.push('[Network]', `DHCP=${nic.dhcp6 ? 'yes' : 'ipv4'}`);
  for (const cidr of staticCidrs(nic)) lines.push(`Address=${cidr}`);
  if (nic.primary) lines.push('KeepConfiguration=dhcp-on-stop');
  lines.push('', '[DHCPv4]', `RouteMetric=${nic.metric}`);
  if (!nic.useDns) lines.push('UseDNS=no');
  if (nic.primary) lines.push('SendRelease=no');
  if (nic.dhcp6) {
    lines.push('', '[DHCPv6]', `RouteMetric=${nic.metric}`);
    if (!nic.useDns) lines.push('UseDNS=no');
  }
  return `${lines.join('\n')}\n`;
}

/** Pure: one `.network` file per NIC of the plan not in `skip`. */
export function renderNetworkd(plan: BoundPlan, skip: ReadonlySet<string>): RenderedFile[] {
  return rendered(plan, skip).map((nic) => ({
    path: `${NETWORKD_DIR}/${networkdFileName(nic.name)}`,
    text: networkdText(nic),
    mode: 0o644,
    interfaces: [nic.name],
  }));
}

/** bootstate's `.network` files of earlier boots. */
export async function networkdOwnedFiles(root: string): Promise<string[]> {
  const names = await listDir(root, NETWORKD_DIR);
  return names.filter((n) => n.startsWith(PREFIX) && n.endsWith('.network')).map((n) => `${NETWORKD_DIR}/${n}`);
}

/** A space-separated list match with networkd's leading `!` inverting the whole list. */
function listMatches(values: string[], test: (item: string) => boolean): boolean {
  const items = values.join(' ').split(/\s+/).filter(Boolean);
  if (items.length === 0) return true;
  const invert = items[0]!.startsWith('!');
  if (invert) items[0] = items[0]!.slice(1);
  return items.some(test) !== invert;
}

/** Whether a `.network` file's `[Match]` section selects this NIC (keys it does not know are taken as matching). */
export function networkdMatches(ini: Ini, nic: BoundNic): boolean {
  const get = (key: string): string[] => iniValues(ini, 'Match', key).filter((v) => v !== '');
  const checks: Array<[string[], (item: string) => boolean]> = [
    [get('Name'), (g) => globMatch(g, nic.name)],
    [get('MACAddress'), (m) => normalMac(m) === nic.mac],
    [get('PermanentMACAddress'), (m) => normalMac(m) === nic.mac],
    [get('Driver'), (g) => globMatch(g, nic.driver)],
    [get('Type'), (g) => globMatch(g, 'ether')],
  ];
  return checks.every(([values, test]) => listMatches(values, test));
}

/** Why a matching image file's configuration differs from the plan, or null when it is plain DHCPv4. */
function networkdDifference(ini: Ini): string | null {
  const addresses = [...iniValues(ini, 'Network', 'Address'), ...iniValues(ini, 'Address', 'Address')].filter(Boolean);
  if (addresses.length > 0) return `it sets static address ${addresses.join(', ')}`;
  const dhcp = (iniValues(ini, 'Network', 'DHCP').at(-1) ?? 'no').toLowerCase();
  if (!['yes', 'true', 'on', '1', 'ipv4', 'both'].includes(dhcp)) return `it leaves DHCPv4 off (DHCP=${dhcp})`;
  return null;
}

/** The image's `.network` files by name, the highest-precedence one of each name, in networkd's order. */
async function imageNetworkFiles(root: string): Promise<Array<{ name: string; path: string; text: string }>> {
  const seen = new Map<string, string>();
  for (const dir of NETWORKD_DIRS) {
    for (const name of await listDir(root, dir)) {
      if (name.endsWith('.network') && !seen.has(name)) seen.set(name, `${dir}/${name}`);
    }
  }
  const files = [];
  for (const [name, path] of [...seen].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (name.startsWith(PREFIX)) continue;
    const text = await readText(root, path);
    if (text !== null && text.trim() !== '') files.push({ name, path, text });
  }
  return files;
}

/** The image's `.network` files that configure a planned interface differently or would take it before bootstate's. */
export async function networkdConflicts(root: string, plan: BoundPlan): Promise<ImageConflict[]> {
  const files = await imageNetworkFiles(root);
  const conflicts: ImageConflict[] = [];
  for (const nic of plan.nics) {
    const first = files.find((f) => networkdMatches(parseIni(f.text), nic));
    if (!first) continue;
    const difference = networkdDifference(parseIni(first.text));
    if (difference !== null) conflicts.push({ interface: nic.name, file: first.path, why: difference });
    else if (first.name < networkdFileName(nic.name)) {
      conflicts.push({
        interface: nic.name,
        file: first.path,
        why: `it sorts before ${networkdFileName(nic.name)}, so networkd would apply it and not bootstate's`,
      });
    }
  }
  return conflicts;
}
