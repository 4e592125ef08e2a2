/**
 * A real DHCP server for the hostname-publishing tests: dnsmasq in a network namespace of its own, cabled by a veth
 * pair to the VM's namespace, where the peer is named `eth0` (or another name, with a subnet of its own: one server
 * per NIC of a VM with several, test/boot/nics.ts). It logs every request with the name the client
 * provides (`--log-dhcp`) and runs a script on every lease change (`add|old|del MAC IP [NAME]`), so a test sees
 * which name each request carried and whether a lease was released. No DNS (`--port=0`), no config file; the
 * server's address is the default router, as dnsmasq offers by default.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { run } from '../../src/system/exec.js';
import { stopProcess, type Vm } from './boot.js';
import { runInSandbox } from './ns.js';

export const DHCP_SUBNET = '10.77.0';

export interface DhcpServer {
  /** The server's own network namespace: a client of the VM on that NIC's network (e.g. ssh to the leased address). */
  netns: string;
  /** dnsmasq's log: `client provides name: …`, `DHCPREQUEST(…) IP MAC`, `DHCPACK(…) IP MAC NAME`, `DHCPRELEASE…`. */
  log(): Promise<string>;
  /** One line per lease change, as the script saw it: `add|old|del MAC IP [NAME]`. */
  events(): Promise<string>;
  /** dnsmasq's lease file: `EXPIRY MAC IP NAME CLIENT-ID`. */
  leases(): Promise<string>;
  stop(): Promise<void>;
}

/** A server for another NIC than eth0 on 10.77.0.0/24: its name, subnet, the one address it leases, DHCPv6. */
export interface DhcpServerOptions {
  /** The client's interface name in its namespace; default `eth0`. */
  name?: string;
  /** The IPv4 /24 as its first three octets (`10.77.1`); default DHCP_SUBNET. The server is `.1`. */
  subnet?: string;
  /** The one IPv4 address to lease (a NIC's first address as IMDS lists it); default a pool of .50–.60. */
  address?: string;
  /** DHCPv6 (with router advertisements that say so) leasing this one address, in its /64; the server is `::1` of it. */
  address6?: string;
}

/**
 * Starts the server and the cable; `tag` makes the namespace and link names unique on this host. `mac` (as IMDS
 * writes it, `000D3A1B2C3D`, or with colons) is the address of the client's eth0, e.g. the one IMDS lists.
 */
export async function startDhcpServer(clientNetns: string, tag: string, mac?: string, options: DhcpServerOptions = {}): Promise<DhcpServer> {
  const work = await mkdtemp(path.join(tmpdir(), 'bootstate-dhcp-'));
  const ns = `bs-dhcps-${tag}`;
  const short = tag.replace(/[^a-z0-9]/gi, '').slice(-8);
  const [server, client] = [`bsd${short}s`, `bsd${short}c`];
  const files = { log: path.join(work, 'dnsmasq.log'), events: path.join(work, 'events.log'), leases: path.join(work, 'leases') };
  let dnsmasq: ChildProcess | null = null;
  const stop = async () => {
    if (dnsmasq) await stopProcess(dnsmasq);
    await run(['ip', 'netns', 'del', ns], { allowFailure: true });
    await rm(work, { recursive: true, force: true });
  };
  try {
    await run(['ip', 'netns', 'add', ns]);
    const address = mac ? ['address', (mac.replace(/[^0-9a-f]/gi, '').match(/../g) ?? []).join(':').toLowerCase()] : [];
    await run(['ip', 'link', 'add', server, 'type', 'veth', 'peer', 'name', client, ...address]);
    await run(['ip', 'link', 'set', server, 'netns', ns]);
    await run(['ip', 'link', 'set', client, 'netns', clientNetns]);
    const subnet = options.subnet ?? DHCP_SUBNET;
    await run(['ip', '-n', ns, 'addr', 'add', `${subnet}.1/24`, 'dev', server]);
    if (options.address6) await run(['ip', '-n', ns, 'addr', 'add', `${prefix64(options.address6)}::1/64`, 'dev', server, 'nodad']);
    await run(['ip', '-n', ns, 'link', 'set', server, 'up']);
    await run(['ip', '-n', clientNetns, 'link', 'set', client, 'name', options.name ?? 'eth0']);
    const script = path.join(work, 'lease-event.sh');
    await writeFile(script, `#!/bin/sh\necho "$*" >> '${files.events}'\n`);
    await chmod(script, 0o755);
    dnsmasq = spawn(
      'ip',
      [
        'netns', 'exec', ns, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--port=0', `--interface=${server}`,
        '--bind-interfaces', `--dhcp-range=${options.address ?? `${subnet}.50`},${options.address ?? `${subnet}.60`},255.255.255.0,10m`,
        ...(options.address6 ? ['--enable-ra', `--dhcp-range=${options.address6},${options.address6},64,10m`] : []),
        `--dhcp-leasefile=${files.leases}`,
        // Azure's DHCP server names the wireserver in option 245 (cloud-init's datasource reads it from the lease).
        '--dhcp-option=245,168.63.129.16',
        // dnsmasq pings an address before it offers it and holds the offer 3 s for the echo that would say the address
        // is taken. Azure's DHCP server knows its leases and answers at once: without this, every boot with a DHCP NIC
        // waited 3 s for the harness, not for the image.
        '--no-ping',
        `--dhcp-script=${script}`, '--log-dhcp', `--log-facility=${files.log}`, `--pid-file=${path.join(work, 'dnsmasq.pid')}`,
        '--user=root',
      ],
      { stdio: 'ignore' },
    );
    await waitFor(async () => (await readFile(files.log, 'utf8').catch(() => '')).includes('DHCP, sockets bound'), 30_000, 'dnsmasq to listen');
  } catch (error) {
    await stop();
    throw error;
  }
  const read = (file: string) => readFile(file, 'utf8').catch(() => '');
  return { netns: ns, log: () => read(files.log), events: () => read(files.events), leases: () => read(files.leases), stop };
}

/** The first four groups of an IPv6 address written with `::` after them at most (`fd77:0:0:1::10` → `fd77:0:0:1`). */
function prefix64(address6: string): string {
  const [head = ''] = address6.split('::');
  const groups = head.split(':');
  if (groups.length > 4 || !address6.includes('::')) throw new Error(`${address6}: write it as up to four groups, then ::`);
  return [...groups, '0', '0', '0', '0'].slice(0, 4).join(':');
}

/** Where the image's dhclient keeps its lease and its pid (`startImageDhclient`). */
export const DHCLIENT_LEASE_FILE = '/var/lib/dhcp/dhclient.eth0.leases';
export const DHCLIENT_PID_FILE = '/run/dhclient.eth0.pid';

/**
 * The image's DHCP client on the VM's eth0 (brought up here): ISC dhclient in the VM's sandbox with Debian's
 * dhclient.conf, which sends the kernel hostname (`send host-name = gethostname();`). Resolves with its pid once it
 * holds a lease and runs in the background.
 */
export async function startImageDhclient(vm: Vm): Promise<number> {
  await run(['ip', '-n', vm.netns.name, 'link', 'set', 'eth0', 'up']);
  await mkdir(vm.sandbox.hostPath('/etc/dhcp'), { recursive: true });
  await mkdir(vm.sandbox.hostPath('/var/lib/dhcp'), { recursive: true });
  await writeFile(vm.sandbox.hostPath('/etc/dhcp/dhclient.conf'), 'send host-name = gethostname();\nrequest subnet-mask, broadcast-address, routers, host-name;\n');
  const argv = ['dhclient', '-4', '-v', '-pf', DHCLIENT_PID_FILE, '-lf', DHCLIENT_LEASE_FILE, 'eth0'];
  const started = await runInSandbox(vm.sandbox, argv, { netns: vm.netns.name, timeoutMs: 60_000 });
  if (started.exitCode !== 0) throw new Error(`dhclient did not get a lease: ${started.stderr}`);
  await waitFor(async () => dhclientAlive(await dhclientPid(vm)), 30_000, "dhclient's pid file");
  return dhclientPid(vm);
}

/** The pid in the VM's dhclient pid file; 0 when there is none. */
export const dhclientPid = async (vm: Vm) => Number((await readFile(vm.sandbox.hostPath(DHCLIENT_PID_FILE), 'utf8').catch(() => '0')).trim());

/** Whether `pid` is a dhclient that has not exited (a zombie nobody reaped yet has). */
export async function dhclientAlive(pid: number): Promise<boolean> {
  if (pid <= 0) return false;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return /^Name:\s+dhclient$/m.test(status) && !/^State:\s+Z/m.test(status);
}

/** Kills the dhclients a test started or made (`pids`, and the one in the pid file now) that still run. */
export async function killDhclients(vm: Vm, pids: number[]): Promise<void> {
  for (const pid of new Set([...pids, await dhclientPid(vm).catch(() => 0)])) {
    if (await dhclientAlive(pid)) process.kill(pid, 'SIGKILL');
  }
}

/** Polls `condition` every 50 ms until it holds; throws naming `what` after `ms`. */
export async function waitFor(condition: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** `ip monitor address` in `netns` from now until `stop()`, which returns every line it printed. */
export function watchAddresses(netns: string): { stop(): Promise<string> } {
  let out = '';
  const monitor = spawn('ip', ['-n', netns, 'monitor', 'address'], { stdio: ['ignore', 'pipe', 'ignore'] });
  monitor.stdout!.on('data', (d) => (out += d));
  return {
    async stop() {
      await stopProcess(monitor);
      return out;
    },
  };
}
