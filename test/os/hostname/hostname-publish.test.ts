/**
 * Which backend publishes and which commands it runs, over a probe tree shaped like the running system's /proc, /sys
 * and /run (real files and symlinks in a temp dir) and a runner that records each command and acts on the tree as
 * the command would (SIGTERM removes the process, a new client writes its lease). The real clients are exercised in
 * test/e2e/hostname-publish.test.ts (dhclient) and test/boot (systemd-networkd).
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { OsContext } from '../../../src/os/backends.js';
import type { RunOptions, RunResult } from '../../../src/system/exec.js';
import { publishHostname, type PublishOptions } from '../../../src/os/hostname/hostname-publish.js';

const ROUTES = 'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\neth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n';
const BACKENDS = ['networkd', 'networkmanager', 'dhclient'];
const DHCLIENT = ['/sbin/dhclient', '-4', '-v', '-pf', '/run/dhclient.eth0.pid', '-lf', '/var/lib/dhcp/dhclient.eth0.leases', 'eth0'];

let root: string;
let commands: string[][];
let onRun: (argv: string[]) => Promise<void>;
let context: OsContext;
const signal = new AbortController().signal;
const at = (p: string) => path.join(root, p);
const options = (overrides: Partial<PublishOptions> = {}): PublishOptions => ({ probeRoot: root, deadline: Date.now() + 2000, observe: true, ...overrides });

async function put(p: string, text: string) {
  await mkdir(path.dirname(at(p)), { recursive: true });
  await writeFile(at(p), text);
}

/** A process of this network namespace (or another one) in the fake /proc. */
async function processInTree(pid: number, name: string, argv: string[], net = 'net:[4026531840]', uid = 0) {
  // As the kernel shows it: at most 15 bytes.
  const comm = name.slice(0, 15);
  await put(`proc/${pid}/comm`, `${comm}\n`);
  await put(`proc/${pid}/cmdline`, `${argv.join('\0')}\0`);
  await put(`proc/${pid}/status`, `Name:\t${comm}\nState:\tS (sleeping)\nUid:\t${uid}\t${uid}\t${uid}\t${uid}\n`);
  await mkdir(at(`proc/${pid}/ns`), { recursive: true });
  await symlink(net, at(`proc/${pid}/ns/net`));
}

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'bootstate-publish-'));
  commands = [];
  onRun = async () => undefined;
  context = {
    root: '/',
    rootOwner: { uid: 0, gid: 0 },
    run: async (argv: string[], _options?: RunOptions): Promise<RunResult> => {
      commands.push(argv);
      await onRun(argv);
      return { argv, exitCode: 0, signal: null, stdout: '', stderr: '', endedBy: 'exit' };
    },
  };
  await put('proc/net/route', ROUTES);
  await mkdir(at('proc/self/ns'), { recursive: true });
  await symlink('net:[4026531840]', at('proc/self/ns/net'));
  await put('sys/class/net/eth0/ifindex', '2\n');
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('publishHostname', () => {
  it('without a running client warns that the name was not published and runs nothing', async () => {
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(result.backend).toBe('none');
    expect(result.warnings).toEqual([
      'hostname not published: no running DHCP client (networkd, networkmanager, dhclient) manages eth0; Azure DNS keeps the name of the last DHCP request',
    ]);
    expect(commands).toEqual([]);
  });

  it('without a default route there is no DHCP network to publish on: said at info level, not as a warning', async () => {
    await put('proc/net/route', ROUTES.split('\n')[0]!);
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(result).toEqual({ backend: 'none', detail: 'hostname not published: no interface has an IPv4 default route' });
  });

  it('networkd managing the link: restarts it and waits for the new lease', async () => {
    await processInTree(310, 'systemd-networkd', ['/lib/systemd/systemd-networkd']);
    await put('run/systemd/netif/links/2', 'ADMIN_STATE=configured\nNETWORK_FILE=/etc/systemd/network/80-eth0.network\n');
    onRun = () => put('run/systemd/netif/leases/2', 'ADDRESS=10.0.0.4\n');
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(commands).toEqual([['systemctl', 'restart', 'systemd-networkd.service']]);
    expect(result).toEqual({ backend: 'networkd', detail: 'hostname web-01 sent in a DHCP request on eth0 (systemd-networkd restarted; new lease received)', warnings: [] });
  });

  it('a networkd that does not manage the link is passed over for the next client', async () => {
    await processInTree(310, 'systemd-networkd', ['/lib/systemd/systemd-networkd']);
    await put('run/systemd/netif/links/2', 'ADMIN_STATE=unmanaged\n');
    await processInTree(400, 'NetworkManager', ['/usr/sbin/NetworkManager', '--no-daemon']);
    await put('run/NetworkManager/devices/2', '[device]\nmanaged=true\nconnection-uuid=5fb06bd0\n');
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(commands).toEqual([['nmcli', 'device', 'modify', 'eth0', 'ipv4.dhcp-send-hostname', 'yes', 'ipv4.dhcp-hostname', 'web-01']]);
    expect(result.backend).toBe('networkmanager');
  });

  it('dhclient: SIGTERM, then the same command line with -nw; no release', async () => {
    await processInTree(512, 'dhclient', DHCLIENT);
    await put('etc/dhcp/dhclient.conf', 'send host-name = gethostname();\n');
    onRun = async (argv) => {
      if (argv[0] === 'kill') await rm(at('proc/512'), { recursive: true });
      if (argv[0] === '/sbin/dhclient') await put('var/lib/dhcp/dhclient.eth0.leases', 'lease {}\n');
    };
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(commands).toEqual([['kill', '-s', 'TERM', '512'], ['/sbin/dhclient', '-nw', ...DHCLIENT.slice(1)]]);
    expect(commands.flat()).not.toContain('-r');
    expect(result.detail).toBe('hostname web-01 sent in a DHCP request on eth0 (dhclient (pid 512) restarted without releasing its lease; new lease received)');
  });

  it('dhclient under systemd: the new client gets a scope of its own', async () => {
    await processInTree(512, 'dhclient', DHCLIENT);
    await put('etc/dhcp/dhclient.conf', 'send host-name = gethostname();\n');
    await mkdir(at('run/systemd/system'), { recursive: true });
    const result = await publishHostname('web-01', BACKENDS, context, options({ observe: false }), signal);
    expect(commands.at(-1)).toEqual(['systemd-run', '--scope', '--quiet', '--', '/sbin/dhclient', '-nw', ...DHCLIENT.slice(1)]);
    expect(result.warnings).toEqual([]);
  });

  it('a dhclient in another network namespace, for another interface, releasing, NetworkManager\'s or not root\'s is not ours', async () => {
    await processInTree(600, 'dhclient', DHCLIENT, 'net:[4026532999]');
    await processInTree(601, 'dhclient', ['dhclient', '-4', 'eth1']);
    await processInTree(602, 'dhclient', ['dhclient', '-r', 'eth0']);
    await processInTree(603, 'dhclient', ['/sbin/dhclient', '-d', '-sf', '/usr/lib/NetworkManager/nm-dhcp-helper', 'eth0']);
    // Started by a user: its command line names what would run again as root.
    await processInTree(604, 'dhclient', ['/tmp/not-dhclient', 'eth0'], 'net:[4026531840]', 1000);
    await put('etc/dhcp/dhclient.conf', 'send host-name = gethostname();\n');
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(result.backend).toBe('none');
    expect(commands).toEqual([]);
  });

  it('dhclient whose config sends no host name is left alone, with a warning saying why', async () => {
    await processInTree(512, 'dhclient', [...DHCLIENT.slice(0, 1), '-cf', '/etc/dhcp/custom.conf', ...DHCLIENT.slice(1)]);
    await put('etc/dhcp/custom.conf', '#send host-name = gethostname();\n');
    const result = await publishHostname('web-01', BACKENDS, context, options(), signal);
    expect(commands).toEqual([]);
    expect(result.warnings).toEqual([
      'hostname not published: dhclient (pid 512) serves eth0 but /etc/dhcp/custom.conf has no "send host-name", so a new request would carry no name',
    ]);
  });

  it('a dhclient that does not stop by the deadline fails the publishing (the chart makes that a warning)', async () => {
    await processInTree(512, 'dhclient', DHCLIENT);
    await put('etc/dhcp/dhclient.conf', 'send host-name = gethostname();\n');
    await expect(publishHostname('web-01', BACKENDS, context, options({ deadline: Date.now() + 150 }), signal)).rejects.toMatchObject({
      code: 'SUBPROCESS_FAILED',
      message: 'dhclient (pid 512) did not stop after SIGTERM',
    });
    expect(commands).toEqual([['kill', '-s', 'TERM', '512']]);
  });

  it('no new lease by the deadline is a warning, not a failure', async () => {
    await processInTree(310, 'systemd-networkd', ['/lib/systemd/systemd-networkd']);
    await put('run/systemd/netif/links/2', 'NETWORK_FILE=/etc/systemd/network/80-eth0.network\n');
    const result = await publishHostname('web-01', BACKENDS, context, options({ deadline: Date.now() + 100 }), signal);
    expect(result.warnings).toEqual(['hostname publishing: systemd-networkd restarted, but no new lease on eth0 before the deadline; the request may still be answered']);
  });

  it('tries only the configured backends, in the configured order, and names unknown ones', async () => {
    await processInTree(310, 'systemd-networkd', ['/lib/systemd/systemd-networkd']);
    await put('run/systemd/netif/links/2', 'NETWORK_FILE=/x.network\n');
    await processInTree(512, 'dhclient', DHCLIENT);
    await put('etc/dhcp/dhclient.conf', 'send host-name = gethostname();\n');
    const result = await publishHostname('web-01', ['pump', 'dhclient', 'networkd'], context, options({ observe: false }), signal);
    expect(result.backend).toBe('dhclient');
    expect(result.warnings).toEqual(['hostname publishing: unknown backend pump']);
  });

  it('finds the interface index in /proc when /sys/class is not the kernel\'s (a container)', async () => {
    await rm(at('sys'), { recursive: true });
    await put('proc/net/dev_snmp6/eth0', 'ifIndex                         \t2\nIp6InReceives                   \t0\n');
    await processInTree(310, 'systemd-networkd', ['/lib/systemd/systemd-networkd']);
    await put('run/systemd/netif/links/2', 'NETWORK_FILE=/x.network\n');
    const result = await publishHostname('web-01', BACKENDS, context, options({ observe: false }), signal);
    expect(result.backend).toBe('networkd');
  });
});
