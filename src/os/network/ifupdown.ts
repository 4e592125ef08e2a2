/**
 * The ifupdown (Debian) backend's renderer and image reader. ifupdown knows interfaces by name only, so each NIC is
 * configured under the name it is bound to (the synthetic interface, never its SR-IOV virtual function).
 *
 * Files: /etc/network/interfaces.d/bootstate-<ifname> (0644) per NIC, read through the `source
 * /etc/network/interfaces.d/*` line Debian's /etc/network/interfaces has; and
 * /etc/dhcp/dhclient-enter-hooks.d/zz-bootstate (0644), sourced by dhclient-script (isc-dhcp-client, the DHCP
 * client ifupdown uses first). The hook sets `IF_METRIC` (the route metric dhclient-script gives the DHCP routes)
 * for every planned interface and, on secondary NICs, replaces `make_resolv_conf` with a function that does nothing,
 * so a secondary NIC's DHCP never rewrites /etc/resolv.conf. Its name sorts after `resolvconf` and `resolved`, the
 * hooks that redefine `make_resolv_conf` themselves, so bootstate's definition is the one left.
 *
 * Extra addresses are `up ip addr add … || true` / `down ip addr del … || true` lines, not a second `iface X inet
 * static` stanza: ifupdown 0.8's static method's down runs `ip -4 addr flush dev X`, which would also take away the
 * DHCP address, the primary's included.
 *
 * Coexistence with the image's own declarations (in /etc/network/interfaces and what it sources): ifupdown runs
 * every stanza of an interface, so declaring `iface eth0 inet dhcp` a second time would start a second DHCP
 * client. An interface the image already declares with `inet dhcp` is therefore left to the image's stanza and
 * bootstate adds its other IPv4 addresses from a dhclient exit hook once the lease is bound
 * (/etc/dhcp/dhclient-exit-hooks.d/zz-bootstate: added before the lease, one would become the subnet's primary
 * address and the source of the VM's traffic), `iface X inet6 dhcp` when the plan asks for DHCPv6 and the image
 * declares no IPv6 for X (a family of its own: no second DHCPv4 client), and the other IPv6 addresses on it (the
 * enter hook still gives X the plan's metric and DNS rule). An interface the image declares
 * any other way (`inet static`, `manual`, `inet6 static`…) is a conflict: reported, left alone.
 */
import { dirname, isAbsolute, join } from 'node:path';
import type { BoundNic, BoundPlan, ImageConflict, RenderedFile } from './types.js';
import { HEADER, globMatch, listDir, readText, rendered } from './common.js';

export const IFUPDOWN_DIR = '/etc/network/interfaces.d';
export const DHCLIENT_HOOK = '/etc/dhcp/dhclient-enter-hooks.d/zz-bootstate';
/** Adds a declared interface's other IPv4 addresses once its lease is bound, so the lease stays its first address. */
export const DHCLIENT_EXIT_HOOK = '/etc/dhcp/dhclient-exit-hooks.d/zz-bootstate';
const PREFIX = 'bootstate-';

// `brd +` for IPv4: an address added without its broadcast makes a later networkd or dhclient run refuse the link
// (seen booted: ERANGE on a restart); IPv6 has no broadcast.
function addressLines(nic: BoundNic, cidrs: string[]): string[] {
  return cidrs.flatMap((c) => {
    const brd = c.includes(':') ? '' : ' brd +';
    return [`    up ip addr add ${c}${brd} dev ${nic.name} || true`, `    down ip addr del ${c} dev ${nic.name} || true`];
  });
}

/** `declared` holds `eth0` for an image's `iface eth0 inet dhcp`, `eth0 inet6` for any `iface eth0 inet6` of it. */
function ifupdownText(nic: BoundNic, declared: ReadonlySet<string>): string | null {
  const four = nic.static4.map((a) => `${a.address}/${a.prefix}`);
  const six = nic.static6.map((a) => `${a.address}/${a.prefix}`);
  const lines = [...HEADER];
  if (declared.has(nic.name)) {
    // IPv6 is a family of its own: its DHCPv6 client never duplicates the image's DHCPv4 one.
    const ownSix = nic.dhcp6 && !declared.has(`${nic.name} inet6`);
    // Its other IPv4 addresses come from the exit hook, after the lease: a stanza of bootstate's is read before the
    // image's (interfaces.d is sourced first), and an address added before the lease would be the subnet's primary
    // one, the source of the VM's traffic.
    if (!ownSix && six.length === 0) return null;
    lines.push(`# The image declares ${nic.name} (inet dhcp): bootstate adds only what it does not.`);
    lines.push(ownSix ? `iface ${nic.name} inet6 dhcp` : `iface ${nic.name} inet6 manual`, ...addressLines(nic, six));
  } else {
    lines.push(`allow-hotplug ${nic.name}`, `iface ${nic.name} inet dhcp`, `    metric ${nic.metric}`);
    lines.push(...addressLines(nic, four));
    if (nic.dhcp6) lines.push(`iface ${nic.name} inet6 dhcp`, ...addressLines(nic, six));
  }
  return `${lines.join('\n')}\n`;
}

function hookText(nics: BoundNic[]): string {
  const lines = [...HEADER, '# Sourced by dhclient-script: the route metric and, on secondary NICs, no DNS.', 'case "$interface" in'];
  for (const nic of nics) {
    lines.push(`  ${nic.name})`, `    IF_METRIC=${nic.metric}`);
    if (!nic.useDns) lines.push('    make_resolv_conf() { :; }');
    lines.push('    ;;');
  }
  lines.push('esac');
  return `${lines.join('\n')}\n`;
}

/** The exit hook: each declared interface's other IPv4 addresses, added once dhclient has bound (or renewed) its lease. */
function exitHookText(nics: BoundNic[]): string {
  const lines = [...HEADER, '# Sourced by dhclient-script: the other IPv4 addresses of interfaces the image declares, after the lease.', 'case "$reason" in', '  BOUND|RENEW|REBIND|REBOOT)', '    case "$interface" in'];
  for (const nic of nics) {
    lines.push(`      ${nic.name})`, ...nic.static4.map((a) => `        ip addr add ${a.address}/${a.prefix} brd + dev ${nic.name} 2>/dev/null || true`), '        ;;');
  }
  lines.push('    esac', '    ;;', 'esac');
  return `${lines.join('\n')}\n`;
}

/** Pure: a file per NIC not in `skip` (only the extras for those in `declared`), and the dhclient hooks. */
export function renderIfupdown(
  plan: BoundPlan,
  skip: ReadonlySet<string>,
  declared: ReadonlySet<string> = new Set(),
): RenderedFile[] {
  const nics = rendered(plan, skip);
  const files: RenderedFile[] = [];
  for (const nic of nics) {
    const text = ifupdownText(nic, declared);
    if (text !== null) files.push({ path: `${IFUPDOWN_DIR}/${PREFIX}${nic.name}`, text, mode: 0o644, interfaces: [nic.name] });
  }
  if (nics.length > 0) {
    files.push({ path: DHCLIENT_HOOK, text: hookText(nics), mode: 0o644, interfaces: nics.map((n) => n.name) });
  }
  const late = nics.filter((nic) => declared.has(nic.name) && nic.static4.length > 0);
  if (late.length > 0) files.push({ path: DHCLIENT_EXIT_HOOK, text: exitHookText(late), mode: 0o644, interfaces: late.map((n) => n.name) });
  return files;
}

export async function ifupdownOwnedFiles(root: string): Promise<string[]> {
  const own = (await listDir(root, IFUPDOWN_DIR)).filter((n) => n.startsWith(PREFIX)).map((n) => `${IFUPDOWN_DIR}/${n}`);
  const hooks: string[] = [];
  for (const hook of [DHCLIENT_HOOK, DHCLIENT_EXIT_HOOK]) if ((await readText(root, hook)) !== null) hooks.push(hook);
  return [...own, ...hooks];
}

/** One `iface NAME FAMILY METHOD` line of the image's configuration and the file it is in. */
export interface IfaceStanza {
  name: string;
  family: string;
  method: string;
  file: string;
}

/** The files a `source` (a glob in its last part) or `source-directory` line names, relative to `from`'s directory. */
async function sourced(root: string, from: string, keyword: string, arg: string): Promise<string[]> {
  const path = isAbsolute(arg) ? arg : join(dirname(from), arg);
  if (keyword === 'source-directory') {
    return (await listDir(root, path)).filter((n) => /^[A-Za-z0-9_-]+$/.test(n)).map((n) => join(path, n));
  }
  const dir = dirname(path);
  const pattern = path.slice(dir.length + 1);
  return (await listDir(root, dir)).filter((n) => globMatch(pattern, n) && !n.startsWith('.')).map((n) => join(dir, n));
}

/** Every `iface` stanza of the image: /etc/network/interfaces and what it sources, bootstate's own files left out. */
export async function imageStanzas(root: string, file = '/etc/network/interfaces', depth = 0): Promise<IfaceStanza[]> {
  const text = depth > 8 ? null : await readText(root, file);
  if (text === null) return [];
  const stanzas: IfaceStanza[] = [];
  for (const raw of text.split('\n')) {
    const words = raw.replace(/#.*/, '').trim().split(/\s+/);
    if (words[0] === 'iface' && words.length >= 4) {
      stanzas.push({ name: words[1]!, family: words[2]!, method: words[3]!, file });
    } else if ((words[0] === 'source' || words[0] === 'source-directory') && words[1]) {
      for (const next of await sourced(root, file, words[0], words[1])) {
        if (!next.split('/').at(-1)!.startsWith(PREFIX)) stanzas.push(...(await imageStanzas(root, next, depth + 1)));
      }
    }
  }
  return stanzas;
}

const COMPATIBLE: Record<string, string[]> = { inet: ['dhcp'], inet6: ['dhcp', 'auto'] };

export async function ifupdownConflicts(root: string, plan: BoundPlan): Promise<ImageConflict[]> {
  const stanzas = await imageStanzas(root);
  const conflicts: ImageConflict[] = [];
  for (const nic of plan.nics) {
    const other = stanzas.find((s) => s.name === nic.name && !(COMPATIBLE[s.family] ?? []).includes(s.method));
    if (other) {
      conflicts.push({ interface: nic.name, file: other.file, why: `it declares iface ${nic.name} ${other.family} ${other.method}` });
    }
  }
  return conflicts;
}

/** The planned interfaces the image declares with `inet dhcp`: bootstate must not declare them again. */
export async function ifupdownDeclared(root: string, plan: BoundPlan): Promise<Set<string>> {
  const stanzas = await imageStanzas(root);
  const names = new Set(plan.nics.map((n) => n.name));
  const dhcp4 = stanzas.filter((s) => names.has(s.name) && s.family === 'inet' && s.method === 'dhcp').map((s) => s.name);
  const six = stanzas.filter((s) => names.has(s.name) && s.family === 'inet6').map((s) => `${s.name} inet6`);
  return new Set([...dhcp4, ...six]);
}
