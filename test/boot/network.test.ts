/**
 * The network step on booted Debian 12: a VM with two NICs, each cabled to a DHCP server of its own, whose IMDS
 * lists two IPv4 addresses and an IPv6 one on NIC 0 and one IPv4 address on NIC 1, beside a VF stand-in carrying
 * NIC 0's MAC (another driver). Once per stack the image's own network configuration is (systemd-networkd with a
 * DHCP .network for eth0; ifupdown with `iface eth0 inet dhcp` in a root built with ifupdown and isc-dhcp-client;
 * NetworkManager with a DHCP profile for eth0 and the eth* NICs managed). No netplan VM: netplan writes its MAC
 * match as PermanentMACAddress=, which a veth never has (apply-netplan.ts).
 *
 * First boot: after the network step `ip -o addr` shows every listed address on the interface with the listed MAC,
 * the default route leaves by eth0, the VF has no address, an SSH session to eth0's leased address opened before the
 * step prints what it was asked to after it, and eth0's lease was never deleted (`ip monitor address`). Next boot,
 * with a third NIC cabled and listed and NIC 1 no longer listed (still cabled): eth2 is configured, eth1 has lost
 * bootstate's configuration (its address and file).
 *
 * The step is the .deb's bootstate-network.service, held at its place in the boot (after bootstate.service and
 * network-online.target) by a drop-in until the SSH session is open.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderers } from '../../src/os/network/renderers.js';
import { run } from '../../src/system/exec.js';
import { watchAddresses, type DhcpServer } from '../e2e/dhcp-server.js';
import { canSandbox } from '../e2e/ns.js';
import { agentEnded, createMachine, journal, show, until, type Boot, type Machine } from './machine.js';
import { addVirtualFunction, addressesByName, cableNic, enableNetworkd, defaultRouteDevice, resetNics, withNetwork, type NicSpec } from './nics.js';
import { configLayer, createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsnet${randomBytes(2).toString('hex')}`;
type Stack = 'networkd' | 'ifupdown' | 'networkmanager';

const NIC0: NicSpec = { name: 'eth0', mac: '00:0d:3a:47:00:10', subnet: '10.77.0', ipv4: ['10.77.0.10', '10.77.0.20'], ipv6: ['fd77::10'] };
const NIC1: NicSpec = { name: 'eth1', mac: '00:0d:3a:47:00:11', subnet: '10.77.1', ipv4: ['10.77.1.10'] };
const NIC2: NicSpec = { name: 'eth2', mac: '00:0d:3a:47:00:12', subnet: '10.77.2', ipv4: ['10.77.2.10'] };
const VF = 'enP1s1';
const DRIVERS_TOML = '[network]\ndrivers = ["veth"]\n';

/** What one boot showed once the step had run. */
interface BootSeen {
  step: { warnings: string[]; log: string };
  /** `ip -o addr` once the boot was up, just before the step ran. */
  beforeStep: Record<string, string[]>;
  addresses: Record<string, string[]>;
  defaultDevice: string | null;
  ssh: { code: number | null; stdout: string; stderr: string };
  /** `ip monitor address` from the step's start until the listed addresses were there (30 s at most). */
  duringStep: string;
  files: string[];
  story: string;
  /** networkd only: after `systemctl restart systemd-networkd` once the step is done. */
  afterRestart: { setup: string; eth0: string[]; deleted: boolean } | null;
}

let rig: Rig;
const UNIT = 'bootstate-network.service';
const machines: Machine[] = [];
const servers: DhcpServer[] = [];
let seen: Record<Stack, Promise<{ first: BootSeen; second: BootSeen }>>;

/** The image's own network configuration: DHCP on eth0 only. */
async function image(m: Machine, stack: Stack): Promise<void> {
  const put = async (p: string, text: string, mode = 0o644) => {
    await mkdir(path.dirname(m.diskPath(p)), { recursive: true });
    await writeFile(m.diskPath(p), text);
    await chmod(m.diskPath(p), mode);
  };
  if (stack === 'networkd') {
    await put('/etc/systemd/network/80-eth0.network', '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n');
    await enableNetworkd(m);
  } else if (stack === 'networkmanager') {
    // A veth is unmanaged by NetworkManager's defaults; a VM's NICs are not. No profile but eth0's: NetworkManager's
    // own default profile takes any other NIC until bootstate's is there.
    await put('/etc/NetworkManager/conf.d/90-nics.conf', '[device-nics]\nmatch-device=interface-name:eth*\nmanaged=1\n');
    await put(
      '/etc/NetworkManager/system-connections/eth0.nmconnection',
      '[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=auto\n\n[ipv6]\nmethod=auto\n',
      0o600,
    );
  } else {
    // What udev's ifupdown hook does for each NIC present at boot on a VM (no udev runs in the container): bring up
    // the `allow-hotplug` interfaces, before network-online.
    await put(
      '/etc/systemd/system/test-hotplug.service',
      '[Unit]\nAfter=networking.service\nBefore=network-online.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n' +
        'ExecStart=/sbin/ifup -a --allow=hotplug\n\n[Install]\nWantedBy=network-online.target\n',
    );
    await mkdir(m.diskPath('/etc/systemd/system/network-online.target.wants'), { recursive: true });
    await symlink('/etc/systemd/system/test-hotplug.service', m.diskPath('/etc/systemd/system/network-online.target.wants/test-hotplug.service'));
    await put('/etc/network/interfaces', 'source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet dhcp\n');
    await mkdir(m.diskPath('/etc/network/interfaces.d'), { recursive: true });
  }
}

/**
 * An SSH session to `address` from `netns` that says `started`, waits `seconds`, then says `alive`; tried again
 * while sshd refuses it (its host keys still being made) until it has started.
 */
async function openSession(netns: string, user: string, address: string, seconds: number) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const child = spawn('ip', [
      'netns', 'exec', netns, 'ssh', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
      '-o', 'LogLevel=ERROR', '-o', 'ConnectTimeout=30', '-o', 'IdentitiesOnly=yes', '-i', rig.key, `${user}@${address}`,
      `echo started; sleep ${seconds}; echo alive`,
    ]);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      child.once('exit', (code) => resolve({ code, stdout, stderr })),
    );
    let exited = false;
    void done.then(() => (exited = true));
    for (const until = Date.now() + 60_000; !stdout.includes('started') && !exited && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (stdout.includes('started')) return { done };
    if (!exited) child.kill('SIGKILL');
    if (Date.now() > deadline) throw new Error(`no SSH session to ${address}: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * The .deb's bootstate-network.service held at its start until the test says go (a drop-in whose ExecStartPre waits
 * for GO), so an SSH session is open before it runs while it keeps its place in the boot.
 */
const GO = '/run/bootstate-test/network-go';
async function gateLayer(stack: Stack): Promise<string> {
  const dir = path.join(rig.workDir, `network-gate-${stack}`);
  await mkdir(path.join(dir, `etc/systemd/system/${UNIT}.d`), { recursive: true });
  await writeFile(
    path.join(dir, `etc/systemd/system/${UNIT}.d/90-test-gate.conf`),
    `[Service]\nExecStartPre=/bin/sh -c 'until [ -e ${GO} ]; do sleep 0.1; done'\nTimeoutStartSec=10min\n`,
  );
  return dir;
}

/** Releases the .deb's unit from its gate and waits for it to finish; its warnings and its journal. */
async function runStep(boot: Boot): Promise<{ warnings: string[]; log: string }> {
  await boot.exec(['sh', '-c', `mkdir -p ${path.dirname(GO)} && touch ${GO}`]);
  const story = async () => (await boot.exec(['systemctl', 'status', '--no-pager', '-l', UNIT])).stdout;
  await until(`${UNIT} to finish`, async () => ((await show(boot, UNIT, ['ActiveState'])).ActiveState === 'activating' ? null : true), 300_000, story);
  const log = (await boot.exec(['journalctl', '--no-pager', '-b', '-o', 'cat', '-u', UNIT])).stdout;
  const warnings = (await journal(boot, ['-b', '-u', UNIT, '-p', 'warning'])).map((e) => e.MESSAGE ?? '');
  const result = (await show(boot, UNIT, ['Result'])).Result;
  if (result !== 'success') warnings.push(`${UNIT}: Result=${result}`);
  return { warnings, log };
}

/** Waits for the point where the step may run: the agent done, eth0 leased (and, with the unit, it held at its gate). */
async function readyForStep(machine: Machine, boot: Boot, story: () => Promise<string>): Promise<void> {
  await until(`${UNIT} at its gate`, async () => ((await show(boot, UNIT, ['SubState'])).SubState === 'start-pre' ? true : null), 300_000, story);
  await agentEnded(boot);
  await until('eth0 to hold its lease', async () => ((await addressesByName(machine.netns)).eth0?.includes('10.77.0.10/24') ? true : null), 90_000, story);
}

async function oneBoot(machine: Machine, stack: Stack, doc: Record<string, any>, primaryServer: DhcpServer): Promise<BootSeen> {
  await resetNics(machine.netns, [VF]);
  const boot = await machine.boot();
  try {
    const story = () => storyOf(machine, boot);
    await readyForStep(machine, boot, story);
    const session = await openSession(primaryServer.netns, String(doc.compute.osProfile.adminUsername), NIC0.ipv4[0]!, 25);
    const beforeStep = await addressesByName(machine.netns);
    const watch = watchAddresses(machine.netns);
    const step = await runStep(boot).catch(async (error: unknown) => {
      await watch.stop();
      throw error;
    });
    // A DHCPv6 lease comes some time after the step's commands return.
    await until('the listed addresses', async () => (hasAll(await addressesByName(machine.netns), doc) ? true : null), 30_000, story).catch(() => undefined);
    const duringStep = await watch.stop();
    const ssh = await session.done;
    const files = await renderers[stack].ownedFiles(`/proc/${boot.pid}/root`);
    const addresses = await addressesByName(machine.netns);
    const defaultDevice = await defaultRouteDevice(machine.netns);
    const told = `${await story()}\nstep: ${step.log}`;
    return { step, beforeStep, addresses, defaultDevice, ssh, duringStep, files, story: told, afterRestart: await restartStack(machine, boot, stack) };
  } finally {
    await boot.shutdown();
  }
}

/**
 * The stack restarted after the step (`systemctl restart systemd-networkd`; ifupdown has no daemon to restart):
 * eth0's setup state and addresses 5 s later, and whether its lease was deleted meanwhile.
 */
async function restartStack(machine: Machine, boot: Boot, stack: Stack): Promise<{ setup: string; eth0: string[]; deleted: boolean } | null> {
  if (stack !== 'networkd') return null;
  const watch = watchAddresses(machine.netns);
  await boot.exec(['systemctl', 'restart', 'systemd-networkd.service']);
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const list = (await boot.exec(['networkctl', '--no-pager', '--no-legend', 'list'])).stdout;
  const setup = /^\s*\d+\s+eth0\s+\S+\s+\S+\s+(\S+)/m.exec(list)?.[1] ?? 'unknown';
  const monitored = await watch.stop();
  return { setup, eth0: (await addressesByName(machine.netns)).eth0 ?? [], deleted: /^Deleted \d+: eth0\s+inet 10\.77\.0\.10\//m.test(monitored) };
}

/** Whether every address the document lists is on the interface carrying its MAC (here: named as in the specs). */
function hasAll(addresses: Record<string, string[]>, doc: Record<string, any>): boolean {
  const nics = [NIC0, NIC1, NIC2].filter((n) => (doc.network.interface as Array<{ macAddress: string }>).some((i) => i.macAddress === n.mac.replace(/:/g, '').toUpperCase()));
  return nics.every((n) => [...n.ipv4, ...(n.ipv6 ?? [])].every((a) => (addresses[n.name] ?? []).some((c) => c.startsWith(`${a}/`))));
}

async function storyOf(machine: Machine, boot: Boot): Promise<string> {
  const exec = async (argv: string[]) => {
    const r = await boot.exec(argv);
    return `$ ${argv.join(' ')}\n${r.stdout}${r.stderr}`;
  };
  return [
    (await run(['ip', '-n', machine.netns, '-o', 'addr'])).stdout,
    (await run(['ip', '-n', machine.netns, 'route'])).stdout,
    await exec(['networkctl', '--no-pager', 'list']),
    await exec(['ifquery', '--state']),
    await exec(['nmcli', '-f', 'NAME,DEVICE,STATE', 'connection', 'show']),
    await exec(['journalctl', '--no-pager', '-b', '-n', '60', '-u', 'systemd-networkd', '-u', 'networking', '-u', 'NetworkManager', '-u', 'bootstate.service']),
  ].join('\n');
}

async function scenario(stack: Stack, packages: string[]): Promise<{ first: BootSeen; second: BootSeen }> {
  const { debian, debLayer } = await rig.withPackages(packages);
  const config = await configLayer(rig, `network-${stack}`, DRIVERS_TOML);
  const name = `${TAG}${stack.slice(0, 2)}${stack.at(-1)}`;
  const first = withNetwork(imdsDocument(rig.publicKey), [NIC0, NIC1]);
  const machine = await createMachine({ name, workDir: rig.workDir, layers: [await gateLayer(stack), config, debLayer, debian], imdsDocument: first, capabilities: ['CAP_NET_ADMIN'] });
  machines.push(machine);
  await image(machine, stack);
  const primary = await cableNic(machine.netns, name, NIC0);
  servers.push(primary, await cableNic(machine.netns, name, NIC1));
  await addVirtualFunction(machine.netns, VF, NIC0.mac);
  const one = await oneBoot(machine, stack, first, primary);
  servers.push(await cableNic(machine.netns, name, NIC2));
  const second = withNetwork(imdsDocument(rig.publicKey), [NIC0, NIC2]);
  await machine.serveImdsDocument(second);
  const two = await oneBoot(machine, stack, second, primary);
  return { first: one, second: two };
}

describe.skipIf(!canSandbox)('Debian 12: the network step configures every NIC IMDS lists, live, keeping the primary\'s lease', () => {
  beforeAll(async () => {
    rig = await createRig();
    if (![path.join(rig.debLayer, 'usr/lib/systemd/system', UNIT), path.join(rig.debLayer, 'lib/systemd/system', UNIT)].some((p) => existsSync(p))) {
      throw new Error(`the .deb installs no ${UNIT}`);
    }
    seen = {
      networkd: scenario('networkd', ['iproute2']),
      ifupdown: scenario('ifupdown', ['ifupdown', 'isc-dhcp-client']),
      networkmanager: scenario('networkmanager', ['network-manager', 'iproute2']),
    };
    for (const p of Object.values(seen)) p.catch(() => undefined);
  }, 1_200_000);

  afterAll(async () => {
    if (seen) await Promise.allSettled(Object.values(seen));
    for (const machine of machines) await machine.destroy().catch(() => undefined);
    for (const server of servers) await server.stop();
    await rig?.cleanup();
  }, 180_000);

  for (const stack of ['networkd', 'ifupdown', 'networkmanager'] as const) {
    describe(stack, () => {
      it('first boot: every listed address is on the NIC with the listed MAC, with no warning', async () => {
        const { first } = await seen[stack];
        expect(first.step.warnings, first.story).toEqual([]);
        expect(first.step.log).toMatch(new RegExp(`rendering for ${stack}`));
        expect(first.addresses.eth0, first.story).toEqual(expect.arrayContaining(['10.77.0.10/24', '10.77.0.20/24']));
        expect(first.addresses.eth0?.some((a) => a.startsWith('fd77::10/')), first.story).toBe(true);
        expect(first.addresses.eth1, first.story).toEqual(expect.arrayContaining(['10.77.1.10/24']));
      }, 1_200_000);

      it('first boot: the default route leaves by eth0, and the VF stand-in is left unconfigured', async () => {
        const { first } = await seen[stack];
        expect(first.defaultDevice, first.story).toBe('eth0');
        expect(first.step.log).toContain(`${VF} (driver vxlan) shares a planned NIC's MAC`);
        expect(first.addresses[VF]).toBeUndefined();
      }, 1_200_000);

      it('first boot: eth0 never lost its lease, and an SSH session opened before the step outlived it', async () => {
        const { first } = await seen[stack];
        expect(first.duringStep).not.toMatch(/^Deleted \d+: eth0\s+inet 10\.77\.0\.10\//m);
        expect(first.ssh.stdout, first.ssh.stderr).toBe('started\nalive\n');
        expect(first.ssh.code).toBe(0);
      }, 1_200_000);

      it('next boot: a NIC added to the VM and to IMDS is configured; one gone from IMDS loses bootstate\'s configuration', async () => {
        const { second } = await seen[stack];
        expect(second.step.warnings, second.story).toEqual([]);
        expect(second.addresses.eth2, second.story).toEqual(expect.arrayContaining(['10.77.2.10/24']));
        // eth1 came up at this boot by bootstate's file of the first one; the step took that configuration away.
        expect(second.beforeStep.eth1, second.story).toContain('10.77.1.10/24');
        expect(second.addresses.eth1 ?? [], second.story).not.toContain('10.77.1.10/24');
        expect(second.files.filter((f) => /eth1/.test(f))).toEqual([]);
        expect(second.addresses.eth0, second.story).toEqual(expect.arrayContaining(['10.77.0.10/24', '10.77.0.20/24']));
        expect(second.defaultDevice).toBe('eth0');
        expect(second.duringStep).not.toMatch(/^Deleted \d+: eth0\s+inet 10\.77\.0\.10\//m);
        expect(second.ssh.stdout, second.ssh.stderr).toBe('started\nalive\n');
      }, 1_200_000);

      if (stack === 'networkd') {
        it('a restart of systemd-networkd after the step keeps eth0 configured with every address, its lease never deleted', async () => {
          for (const boot of Object.values(await seen[stack])) {
            expect(boot.afterRestart?.setup, boot.story).toBe('configured');
            expect(boot.afterRestart?.eth0).toEqual(expect.arrayContaining(['10.77.0.10/24', '10.77.0.20/24']));
            expect(boot.afterRestart?.deleted).toBe(false);
          }
        }, 1_200_000);
      }
    });
  }
});
