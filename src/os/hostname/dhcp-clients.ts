/**
 * Finds the DHCP client that manages the primary interface, from the running system's state only (`/proc`, `/run`,
 * `/sys`): no command runs here, so a dry run can probe the real machine and print exactly what it would change.
 * Every reader takes the root it reads under, so tests can point it at a fake tree.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** A running process: its pid, command name, argument vector as /proc/PID/cmdline holds it, and real uid (null: unknown). */
export interface ClientProcess {
  pid: number;
  /** /proc/PID/comm: the first 15 bytes of the command name. */
  comm: string;
  argv: string[];
  uid: number | null;
}

/**
 * The interface of the IPv4 default route in `/proc/net/route` (lowest metric first), or null when there is none.
 *
 * @example primaryInterfaceOf('Iface\tDestination\tGateway…\neth0\t00000000\t0100000A\t0003\t0\t0\t100\t…') // 'eth0'
 */
export function primaryInterfaceOf(routeTable: string): string | null {
  let best: { iface: string; metric: number } | null = null;
  for (const line of routeTable.split('\n').slice(1)) {
    const [iface, destination, , flags, , , metric, mask] = line.trim().split(/\s+/);
    if (!iface || destination !== '00000000' || mask !== '00000000') continue;
    // RTF_UP (0x1): a route the kernel uses.
    if ((Number.parseInt(flags ?? '0', 16) & 0x1) === 0) continue;
    const m = Number(metric ?? 0);
    if (!best || m < best.metric) best = { iface, metric: m };
  }
  return best?.iface ?? null;
}

export async function primaryInterface(root = '/'): Promise<string | null> {
  const table = await readFile(path.join(root, 'proc/net/route'), 'utf8').catch(() => '');
  return primaryInterfaceOf(table);
}

/**
 * The interface index the kernel gave `iface`, or null (networkd and NetworkManager name their state files by it):
 * from sysfs, else from the IPv6 statistics in /proc, for containers whose /sys/class is not the kernel's.
 */
export async function interfaceIndex(iface: string, root = '/'): Promise<number | null> {
  if (iface.includes('/') || iface.startsWith('.')) return null;
  const sys = await readFile(path.join(root, 'sys/class/net', iface, 'ifindex'), 'utf8').catch(() => '');
  const snmp = sys ? '' : await readFile(path.join(root, 'proc/net/dev_snmp6', iface), 'utf8').catch(() => '');
  const n = Number.parseInt(sys ? sys.trim() : (/^ifIndex\s+(\d+)/m.exec(snmp)?.[1] ?? ''), 10);
  return Number.isInteger(n) && n > 0 ? n : null;
}

/**
 * Running processes whose command name is one of `names` and that share this process's network namespace: a
 * client in another namespace does not serve this machine's interfaces.
 */
export async function processesNamed(names: string[], root = '/'): Promise<ClientProcess[]> {
  const proc = path.join(root, 'proc');
  // /proc is memory, never a disk: synchronous reads take microseconds where each promise costs far more.
  const read = (p: string) => {
    try {
      return readFileSync(path.join(proc, p), 'utf8');
    } catch {
      return '';
    }
  };
  const link = (p: string) => {
    try {
      return readlinkSync(path.join(proc, p));
    } catch {
      return null;
    }
  };
  const ownNet = link('self/ns/net');
  // The kernel keeps 15 bytes of a command name: systemd-networkd is `systemd-network` there.
  const comms = names.map((n) => n.slice(0, 15));
  let entries: string[] = [];
  try {
    entries = readdirSync(proc);
  } catch {
    // no /proc: nothing runs that could be found
  }
  const found: ClientProcess[] = [];
  for (const pid of entries) {
    const comm = /^\d+$/.test(pid) ? read(`${pid}/comm`).trim() : '';
    if (!comms.includes(comm)) continue;
    if (ownNet !== null && link(`${pid}/ns/net`) !== ownNet) continue;
    const argv = read(`${pid}/cmdline`).split('\0').filter((a, i, all) => a !== '' || i < all.length - 1);
    const uid = /^Uid:\s+(\d+)/m.exec(read(`${pid}/status`))?.[1];
    if (argv.length > 0) found.push({ pid: Number(pid), comm, argv, uid: uid === undefined ? null : Number(uid) });
  }
  return found.sort((a, b) => a.pid - b.pid);
}

/**
 * ISC dhclient options that take a value (dhclient(8); `-H`, `-F`, `-V` are Fedora's additions); every other dash
 * argument is a flag (`-I` included: in 4.x it takes none).
 */
const DHCLIENT_VALUE_OPTIONS = new Set([
  '-p', '-s', '-cf', '-df', '-lf', '-pf', '-sf', '-e', '-D', '-H', '-F', '-V',
  '--dad-wait-time', '--prefix-len-hint', '--decline-wait-time', '--address-prefix-len',
]);

/** What a dhclient command line says: its interfaces (none = all), files, and whether it is a one-off stop. */
export interface DhclientArgs {
  interfaces: string[];
  leaseFile: string;
  configFile: string;
  /** `-r` (release) or `-x` (stop): a process on its way out, not the client serving the interface. */
  stopping: boolean;
  /** Started by NetworkManager (its `nm-dhcp-helper` as the script): NetworkManager's to restart, not ours. */
  networkManager: boolean;
  ipv6: boolean;
}

/**
 * Reads a dhclient argument vector.
 *
 * @example parseDhclientArgs(['dhclient', '-4', '-pf', '/run/d.pid', '-lf', '/var/lib/dhcp/l', 'eth0']).interfaces // ['eth0']
 */
export function parseDhclientArgs(argv: string[]): DhclientArgs {
  const out: DhclientArgs = {
    interfaces: [],
    leaseFile: '/var/lib/dhcp/dhclient.leases',
    configFile: '/etc/dhcp/dhclient.conf',
    stopping: false,
    networkManager: false,
    ipv6: false,
  };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (DHCLIENT_VALUE_OPTIONS.has(a)) {
      const value = argv[++i] ?? '';
      if (a === '-lf') out.leaseFile = value;
      if (a === '-cf') out.configFile = value;
      if (a === '-sf' && value.includes('nm-dhcp-helper')) out.networkManager = true;
    } else if (a === '-r' || a === '-x') out.stopping = true;
    else if (a === '-6') out.ipv6 = true;
    else if (!a.startsWith('-')) out.interfaces.push(a);
  }
  return out;
}

/**
 * Whether a dhclient.conf sends the host name (option 12): `send host-name …;` outside a comment. Without it a
 * new request would carry no name at all.
 */
export function dhclientSendsHostname(conf: string): boolean {
  return conf.split('\n').some((line) => /^\s*send\s+host-name\b/.test(line.replace(/#.*/, '')));
}

/**
 * Whether systemd-networkd's state file for a link (`/run/systemd/netif/links/IFINDEX`) says it manages it:
 * a `.network` file applies (`NETWORK_FILE=`) and the link is not `unmanaged`.
 */
export function networkdManages(linkState: string): boolean {
  const keys = keyValues(linkState);
  return keys.get('ADMIN_STATE') !== 'unmanaged' && (keys.has('NETWORK_FILE') || keys.get('ADMIN_STATE') === 'configured');
}

/** Whether NetworkManager's device state (`/run/NetworkManager/devices/IFINDEX`, a keyfile) says it manages it. */
export function networkManagerManages(deviceState: string): boolean {
  let group = '';
  for (const raw of deviceState.split('\n')) {
    const line = raw.trim();
    const header = /^\[(.+)\]$/.exec(line);
    if (header) group = header[1]!;
    else if (group === 'device' && /^managed\s*=/.test(line)) return /^managed\s*=\s*(true|1|yes)$/i.test(line);
  }
  return false;
}

function keyValues(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}
