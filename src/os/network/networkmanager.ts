/**
 * The NetworkManager backend's renderer and image reader: one keyfile per NIC,
 * /etc/NetworkManager/system-connections/bootstate-<ifname>.nmconnection, mode 0600 (NetworkManager ignores a
 * keyfile others can read). The profile matches by `[ethernet] mac-address=` *and* `[match] driver=` (so never the
 * SR-IOV virtual function, whose MAC is the same), carries a UUID derived from the MAC (the same on every boot, so
 * a rewrite is the same profile), DHCPv4 with the plan's `route-metric`, the other addresses as `addressN=` beside
 * `method=auto`, `ignore-auto-dns=true` on secondary NICs, and IPv6 by DHCPv6 (`method=dhcp`) when the plan asks
 * for it, else NetworkManager's default for a new profile (`auto`).
 *
 * Coexistence with the image's own profiles: NetworkManager activates on a device the autoconnecting profile with
 * the highest `autoconnect-priority`. bootstate's profiles have priority 50, above the default 0 of the image's
 * (cloud-init's, the installer's), so on a NIC the image configures compatibly (DHCPv4, no static address) bootstate's
 * profile is the one used and the image's keyfile stays as it was. An image profile for the interface (by
 * `interface-name`, `mac-address`, or neither, which fits any ethernet device) with `method=manual` or another
 * non-DHCP method, static addresses, or a priority of 50 or more is a conflict: reported, left alone.
 */
import type { BoundNic, BoundPlan, ImageConflict, RenderedFile } from './types.js';
import { HEADER, iniValues, listDir, normalMac, parseIni, readText, rendered } from './common.js';
import type { Ini } from './common.js';

export const NM_DIR = '/etc/NetworkManager/system-connections';
/** Where NetworkManager's keyfile plugin reads profiles. */
export const NM_DIRS = [NM_DIR, '/run/NetworkManager/system-connections', '/usr/lib/NetworkManager/system-connections'];
export const NM_PRIORITY = 50;
const PREFIX = 'bootstate-';

/** A name-based (version 5 layout) UUID from the MAC: stable across boots. */
export function profileUuid(mac: string): string {
  const h = process.getBuiltinModule('node:crypto').createHash('sha1').update(`bootstate:${mac}`).digest('hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function ipSection(family: 'ipv4' | 'ipv6', nic: BoundNic): string[] {
  const addresses = family === 'ipv4' ? nic.static4 : nic.static6;
  const method = family === 'ipv4' ? 'auto' : nic.dhcp6 ? 'dhcp' : 'auto';
  const lines = [`[${family}]`, `method=${method}`, `route-metric=${nic.metric}`];
  addresses.forEach((a, i) => lines.push(`address${i + 1}=${a.address}/${a.prefix}`));
  if (!nic.useDns) lines.push('ignore-auto-dns=true');
  return lines;
}

function keyfileText(nic: BoundNic): string {
  const lines = [
    ...HEADER,
    '[connection]',
    `id=${PREFIX}${nic.name}`,
    `uuid=${profileUuid(nic.mac)}`,
    'type=ethernet',
    `autoconnect-priority=${NM_PRIORITY}`,
    '',
    '[ethernet]',
    `mac-address=${nic.mac.toUpperCase()}`,
    '',
    '[match]',
    `driver=${nic.driver}`,
    '',
    ...ipSection('ipv4', nic),
    '',
    ...ipSection('ipv6', nic),
  ];
  return `${lines.join('\n')}\n`;
}

export function nmFileName(ifname: string): string {
  return `${PREFIX}${ifname}.nmconnection`;
}

/** Pure: one keyfile per NIC of the plan not in `skip`. */
export function renderNetworkManager(plan: BoundPlan, skip: ReadonlySet<string>): RenderedFile[] {
  return rendered(plan, skip).map((nic) => ({
    path: `${NM_DIR}/${nmFileName(nic.name)}`,
    text: keyfileText(nic),
    mode: 0o600,
    interfaces: [nic.name],
  }));
}

export async function networkManagerOwnedFiles(root: string): Promise<string[]> {
  const names = await listDir(root, NM_DIR);
  return names.filter((n) => n.startsWith(PREFIX) && n.endsWith('.nmconnection')).map((n) => `${NM_DIR}/${n}`);
}

/** Whether an image profile applies to this NIC: ethernet, and its interface-name and mac-address (when set) fit. */
export function nmMatches(ini: Ini, nic: BoundNic): boolean {
  const type = iniValues(ini, 'connection', 'type').at(-1) ?? 'ethernet';
  if (type !== 'ethernet' && type !== '802-3-ethernet') return false;
  const name = iniValues(ini, 'connection', 'interface-name').at(-1);
  const mac = [...iniValues(ini, 'ethernet', 'mac-address'), ...iniValues(ini, '802-3-ethernet', 'mac-address')].at(-1);
  return (!name || name === nic.name) && (!mac || normalMac(mac) === nic.mac);
}

function nmDifference(ini: Ini): string | null {
  for (const family of ['ipv4', 'ipv6']) {
    const method = iniValues(ini, family, 'method').at(-1) ?? 'auto';
    const ok = family === 'ipv4' ? ['auto'] : ['auto', 'dhcp', 'ignore', 'disabled', 'link-local'];
    if (!ok.includes(method)) return `its ${family}.method is ${method}`;
    const section = ini.get(family) ?? new Map<string, string[]>();
    const addresses = [...section].filter(([k]) => /^address(es)?\d*$/.test(k)).flatMap(([, v]) => v);
    if (addresses.length > 0) return `it sets static ${family} address ${addresses.join(', ')}`;
  }
  const priority = Number(iniValues(ini, 'connection', 'autoconnect-priority').at(-1) ?? '0');
  if (priority >= NM_PRIORITY) return `its autoconnect-priority ${priority} is not below bootstate's ${NM_PRIORITY}`;
  return null;
}

/** The image's keyfiles that configure a planned interface differently or would be preferred to bootstate's. */
export async function networkManagerConflicts(root: string, plan: BoundPlan): Promise<ImageConflict[]> {
  const profiles: Array<{ path: string; ini: Ini }> = [];
  for (const dir of NM_DIRS) {
    for (const name of await listDir(root, dir)) {
      if (name.startsWith(PREFIX) || name.startsWith('.') || name.endsWith('~')) continue;
      const text = await readText(root, `${dir}/${name}`);
      if (text !== null) profiles.push({ path: `${dir}/${name}`, ini: parseIni(text) });
    }
  }
  const conflicts: ImageConflict[] = [];
  for (const nic of plan.nics) {
    for (const { path, ini } of profiles.filter((p) => nmMatches(p.ini, nic))) {
      const why = nmDifference(ini);
      if (why !== null) conflicts.push({ interface: nic.name, file: path, why });
    }
  }
  return conflicts;
}
