/**
 * Pool VMs on booted Debian 12 (systemd as PID 1 under systemd-nspawn, the .deb installed): the network a pool VM
 * lives through. For Savable and Running the fake fabric is not on the VM's loopback but behind its NIC: it runs in
 * a namespace of its own ("the fabric's"), which holds Azure's addresses and the far end of each NIC's cable with a
 * DHCP server (dnsmasq) on it; the VM reaches the fabric only through the NIC's lease and default route. The fabric
 * claims the pool VM once the test says so (serve.ts --claim-when), when the network the claim needs is in place.
 *
 * - Savable (ifupdown): after the pool Ready the VM's NIC is deleted; then a new one with another MAC, on another
 *   subnet, is attached. bootstate finds it, gets a lease through ifupdown, sees the fabric answer through it, is
 *   claimed and provisions the customer; the fabric heard the pool Ready, then polls only once the new NIC was
 *   there, then the customer's Ready.
 * - Running (ifupdown, networkd): after the first poll the NIC is moved to another subnet (carrier down, the DHCP
 *   server restarted with a new range, the old gateway gone, carrier up); the VM ends on the new address and
 *   provisions the customer.
 * - PreprovisionedOSDisk (fabric on the VM's loopback, as in the other boot tests): Ready to the pool, then the wait
 *   until the VM is powered off; bootstate exits 0 on the SIGTERM; the next boot of the same disk reports
 *   ProvisioningFailed (PPS_NOT_SHUT_DOWN).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/fabric/behaviours.js';
import { decodeReport } from '../../src/azure/report.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { run } from '../../src/system/exec.js';
import { readRecordedRequests, reportKindsOf, startFabric, stopProcess } from '../e2e/boot.js';
import { canSandbox, createNetns, type Netns } from '../e2e/ns.js';
import { createMachine, until, type Boot, type Machine } from './machine.js';
import { addressesByName, enableNetworkd } from './nics.js';
import { configLayer, createRig, type Rig } from './scenario.js';

const TAG = `bspl${randomBytes(2).toString('hex')}`;
const DATA_DIR = '/var/lib/bootstate';
type Stack = 'networkd' | 'ifupdown';
const PACKAGES: Record<Stack, string[]> = { networkd: ['iproute2'], ifupdown: ['ifupdown', 'isc-dhcp-client'] };
// Generous NIC deadlines: the harness's own pace decides when the NIC goes and comes, on a loaded machine.
const POOL_TOML = '[preprovisioning]\npoll_interval_secs = 1\nnic_detach_timeout_secs = 900\nnic_attach_timeout_secs = 900\n';

let rig: Rig;
const cleanups: Array<() => Promise<unknown>> = [];

/** The image's own network configuration: DHCP on eth0, by name (a NIC hot-attached after the first gets eth0 too). */
async function image(m: Machine, stack: Stack): Promise<void> {
  const put = async (p: string, text: string) => {
    await mkdir(path.dirname(m.diskPath(p)), { recursive: true });
    await writeFile(m.diskPath(p), text);
  };
  if (stack === 'networkd') {
    await put('/etc/systemd/network/80-eth0.network', '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n');
    await enableNetworkd(m);
  } else {
    await put('/etc/network/interfaces', 'source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet dhcp\n');
    await mkdir(m.diskPath('/etc/network/interfaces.d'), { recursive: true });
  }
}

/** One NIC's cable: the VM end (`name`, `mac`) in the VM's namespace, the far end in the fabric's with dnsmasq on it. */
interface Cable {
  /** Moves the far end to `subnet`: carrier down, the old gateway gone, dnsmasq restarted with the new range, carrier up. */
  move(subnet: string): Promise<void>;
  /** dnsmasq's log. */
  log(): Promise<string>;
  stop(): Promise<void>;
}

async function cable(fabricNs: string, vmNetns: string, id: string, nic: { name: string; mac: string; subnet: string }): Promise<Cable> {
  const work = await mkdtemp(path.join(tmpdir(), 'bootstate-pool-dhcp-'));
  const far = `${id}f`;
  const near = `${id}n`;
  const logFile = path.join(work, 'dnsmasq.log');
  let dnsmasq: ChildProcess | null = null;
  const start = async (subnet: string) => {
    await writeFile(logFile, '');
    dnsmasq = spawn(
      'ip',
      [
        'netns', 'exec', fabricNs, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--port=0', `--interface=${far}`, '--bind-interfaces',
        `--dhcp-range=${subnet}.50,${subnet}.60,255.255.255.0,10m`, `--dhcp-leasefile=${path.join(work, `leases-${subnet}`)}`,
        '--log-dhcp', `--log-facility=${logFile}`, `--pid-file=${path.join(work, 'dnsmasq.pid')}`, '--user=root',
      ],
      { stdio: 'ignore' },
    );
    for (const deadline = Date.now() + 30_000; !(await readFile(logFile, 'utf8').catch(() => '')).includes('DHCP, sockets bound'); ) {
      if (Date.now() > deadline) throw new Error(`dnsmasq on ${far} did not listen within 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  await run(['ip', 'link', 'add', far, 'type', 'veth', 'peer', 'name', near, 'address', nic.mac]);
  await run(['ip', 'link', 'set', far, 'netns', fabricNs]);
  await run(['ip', 'link', 'set', near, 'netns', vmNetns]);
  await run(['ip', '-n', vmNetns, 'link', 'set', near, 'name', nic.name]);
  await run(['ip', '-n', fabricNs, 'addr', 'add', `${nic.subnet}.1/24`, 'dev', far]);
  await run(['ip', '-n', fabricNs, 'link', 'set', far, 'up']);
  await start(nic.subnet);
  const stopDhcp = async () => {
    if (dnsmasq) await stopProcess(dnsmasq);
    dnsmasq = null;
  };
  return {
    async move(subnet) {
      await run(['ip', '-n', fabricNs, 'link', 'set', far, 'down']);
      await stopDhcp();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await run(['ip', '-n', fabricNs, 'addr', 'flush', 'dev', far]);
      await run(['ip', '-n', fabricNs, 'addr', 'add', `${subnet}.1/24`, 'dev', far]);
      await run(['ip', '-n', fabricNs, 'link', 'set', far, 'up']);
      await start(subnet);
    },
    log: () => readFile(logFile, 'utf8').catch(() => ''),
    async stop() {
      await stopDhcp();
      await run(['ip', '-n', fabricNs, 'link', 'del', far], { allowFailure: true });
      await rm(work, { recursive: true, force: true });
    },
  };
}

/** A VM whose fabric is behind its NIC: the fabric's namespace, the fabric there, the VM's loopback without Azure's addresses. */
interface PooledVm {
  machine: Machine;
  fabricNs: string;
  /** The fabric claims the VM once this host file exists. */
  claimFile: string;
  requests(): Promise<RecordedRequest[]>;
}

async function pooledVm(name: string, stack: Stack, scenario: string): Promise<PooledVm> {
  const { debian, debLayer } = await rig.withPackages(PACKAGES[stack]);
  const config = await configLayer(rig, `pool-${name}`, POOL_TOML);
  const machine = await createMachine({ name, workDir: rig.workDir, layers: [config, debLayer, debian], fabric: false, capabilities: ['CAP_NET_ADMIN'] });
  cleanups.push(() => machine.destroy());
  await image(machine, stack);
  // Azure's addresses leave the VM's loopback: only the NIC leads to them.
  await run(['ip', '-n', machine.netns, 'route', 'del', '168.63.129.16/32', 'dev', 'lo'], { allowFailure: true });
  for (const address of ['169.254.169.254/32', '168.63.129.16/32']) await run(['ip', '-n', machine.netns, 'addr', 'del', address, 'dev', 'lo']);
  const fabricNetns: Netns = await createNetns(`${name}-fab`);
  cleanups.push(() => fabricNetns.delete());
  const dir = path.join(rig.workDir, `${name}-fabric`);
  await mkdir(dir, { recursive: true });
  const record = path.join(dir, 'requests.jsonl');
  const claimFile = path.join(dir, 'claim');
  await writeFile(record, '');
  const fabric = await startFabric(fabricNetns.name, scenario, record, undefined, undefined, { claimWhen: claimFile });
  cleanups.push(() => stopProcess(fabric));
  return { machine, fabricNs: fabricNetns.name, claimFile, requests: () => readRecordedRequests(record) };
}

const isReady = (r: RecordedRequest) => r.route === 'health' && r.body.includes('"state":"Ready"');

/** The run journal's records so far (what the chart entered), as text. */
async function runJournal(machine: Machine): Promise<string> {
  const dir = machine.diskPath(`${DATA_DIR}/runs`);
  const names = await readdir(dir).catch(() => [] as string[]);
  return (await Promise.all(names.map((n) => readFile(path.join(dir, n), 'utf8').catch(() => '')))).join('\n');
}

async function storyOf(vm: { machine: Machine; requests(): Promise<RecordedRequest[]> }, boot: Boot): Promise<string> {
  const unit = await boot.exec(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate.service', '-u', 'networking.service', '-u', 'systemd-networkd', '-o', 'short-monotonic']);
  const kinds = reportKindsOf(await vm.requests());
  const routes = (await vm.requests()).map((r) => r.route).join(' ');
  const addrs = (await run(['ip', '-n', vm.machine.netns, '-o', 'addr'], { allowFailure: true })).stdout;
  return `reports: ${kinds.join(', ')}\nrequests: ${routes}\naddresses:\n${addrs}\njournal:\n${unit.stdout.slice(-30000)}`;
}

/** Every PROVISIONING_REPORT in the VM's KVP pool, decoded. */
async function kvpReports(machine: Machine): Promise<Array<Map<string, string>>> {
  const pool = await readFile(machine.diskPath('/var/lib/hyperv/.kvp_pool_1')).catch(() => Buffer.alloc(0));
  return decodeRecords(pool)
    .filter((r) => r.key === 'PROVISIONING_REPORT')
    .map((r) => new Map(decodeReport(r.value)));
}

const users = async (machine: Machine) => (await readFile(machine.diskPath('/etc/passwd'), 'utf8').catch(() => '')).split('\n').map((l) => l.split(':')[0]);

interface SavableSeen {
  requests: RecordedRequest[];
  detachedAt: number;
  attachedAt: number;
  addresses: Record<string, string[]>;
  users: string[];
  kvp: Array<Map<string, string>>;
  unit: string;
  story: string;
}

async function savable(): Promise<SavableSeen> {
  const vm = await pooledVm(`${TAG}sv`, 'ifupdown', 'pps-savable');
  const { machine } = vm;
  const first = await cable(vm.fabricNs, machine.netns, `${TAG}a`, { name: 'eth0', mac: '00:0d:3a:48:00:10', subnet: '10.48.0' });
  cleanups.push(() => first.stop());
  const boot = await machine.boot();
  const story = () => storyOf(vm, boot);
  await until('the pool Ready', async () => ((await vm.requests()).some(isReady) ? true : null), 600_000, story, 500);
  await until('the wait for the NIC to be detached', async () => ((await runJournal(machine)).includes('detachingNic') ? true : null), 120_000, story, 500);
  // The host detaches the pool's NIC: the cable goes, with its DHCP server.
  const detachedAt = Date.now();
  await first.stop();
  await until('the wait for an attached NIC', async () => ((await runJournal(machine)).includes('listening') ? true : null), 120_000, story, 500);
  const attachedAt = Date.now();
  const second = await cable(vm.fabricNs, machine.netns, `${TAG}b`, { name: 'eth0', mac: '00:0d:3a:48:01:20', subnet: '10.48.1' });
  cleanups.push(() => second.stop());
  await writeFile(vm.claimFile, '');
  await until('the customer\'s Ready', async () => ((await vm.requests()).filter(isReady).length >= 2 ? true : null), 600_000, story, 1000);
  await until('bootstate to end', async () => (/^(exited|dead)$/.test((await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'SubState', '--value'])).stdout.trim()) ? true : null), 120_000, story, 500);
  const unit = (await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'Result', '-p', 'ExecMainStatus'])).stdout;
  const seen = { requests: await vm.requests(), detachedAt, attachedAt, addresses: await addressesByName(machine.netns), users: await users(machine), kvp: await kvpReports(machine), unit, story: await story() };
  await boot.shutdown();
  return seen;
}

interface RunningSeen {
  requests: RecordedRequest[];
  movedAt: number;
  addresses: Record<string, string[]>;
  users: string[];
  unit: string;
  story: string;
}

async function running(stack: Stack): Promise<RunningSeen> {
  const vm = await pooledVm(`${TAG}r${stack.slice(0, 2)}`, stack, 'pps-unclaimed');
  const { machine } = vm;
  const nic = await cable(vm.fabricNs, machine.netns, `${TAG}${stack.slice(0, 2)}`, { name: 'eth0', mac: '00:0d:3a:48:02:30', subnet: '10.49.0' });
  cleanups.push(() => nic.stop());
  const boot = await machine.boot();
  const story = () => storyOf(vm, boot);
  await until('the first poll', async () => ((await vm.requests()).some((r) => r.route === 'reprovision') ? true : null), 600_000, story, 500);
  // The claim moves the NIC to the customer's network.
  const movedAt = Date.now();
  await nic.move('10.49.1');
  await writeFile(vm.claimFile, '');
  await until('the customer\'s Ready', async () => ((await vm.requests()).filter(isReady).length >= 2 ? true : null), 600_000, story, 1000);
  await until('bootstate to end', async () => (/^(exited|dead)$/.test((await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'SubState', '--value'])).stdout.trim()) ? true : null), 120_000, story, 500);
  const unit = (await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'Result', '-p', 'ExecMainStatus'])).stdout;
  const seen = { requests: await vm.requests(), movedAt, addresses: await addressesByName(machine.netns), users: await users(machine), unit, story: await story() };
  await boot.shutdown();
  return seen;
}

interface OsDiskSeen {
  readyBeforePoweroff: string[];
  markers: string[];
  /** What bootstate.service's ExecStopPost saw at the power-off: `$SERVICE_RESULT $EXIT_CODE $EXIT_STATUS`. */
  stopped: string;
  second: RecordedRequest[];
  kinds: string[];
  story: string;
}

/** A drop-in that records how bootstate.service's process ended, on the VM's disk. */
async function stopRecordLayer(): Promise<string> {
  const dir = path.join(rig.workDir, 'pool-stop-record');
  await mkdir(path.join(dir, 'etc/systemd/system/bootstate.service.d'), { recursive: true });
  await writeFile(
    path.join(dir, 'etc/systemd/system/bootstate.service.d/90-stop-record.conf'),
    `[Service]\nExecStopPost=/bin/sh -c 'mkdir -p /var/lib/pool-test && echo "$SERVICE_RESULT $EXIT_CODE $EXIT_STATUS" >> /var/lib/pool-test/stopped'\n`,
  );
  return dir;
}

async function osDisk(): Promise<OsDiskSeen> {
  const { debian, debLayer } = await rig.withPackages(PACKAGES.networkd);
  const name = `${TAG}od`;
  const machine = await createMachine({ name, workDir: rig.workDir, layers: [await stopRecordLayer(), debLayer, debian], scenario: 'pps-os-disk' });
  cleanups.push(() => machine.destroy());
  const vm = { machine, requests: () => machine.requests() };
  let boot = await machine.boot();
  const story = () => storyOf(vm, boot);
  const markers = async () => (await readdir(machine.diskPath(DATA_DIR)).catch(() => [] as string[])).filter((n) => /\.(waiting-for-\S+|provisioned|report-pending)$/.test(n));
  await until('the wait for the shutdown', async () => ((await runJournal(machine)).includes('awaitingShutdown') ? true : null), 600_000, story, 500);
  const readyBeforePoweroff = await machine.reportKinds();
  const markersSeen = await markers();
  await boot.shutdown();
  const stopped = (await readFile(machine.diskPath('/var/lib/pool-test/stopped'), 'utf8').catch(() => '')).trim();
  const before = (await machine.requests()).length;
  boot = await machine.boot();
  await until('the failure report', async () => ((await machine.reportKinds()).some((k) => k.startsWith('NotReady/ProvisioningFailed')) ? true : null), 600_000, story, 1000);
  const seen = { readyBeforePoweroff, markers: markersSeen, stopped, second: (await machine.requests()).slice(before), kinds: await machine.reportKinds(), story: await story() };
  await boot.shutdown();
  return seen;
}

let seen: { savable: Promise<SavableSeen>; running: Record<Stack, Promise<RunningSeen>>; osDisk: Promise<OsDiskSeen> };

describe.skipIf(!canSandbox)('Debian 12: pool VMs and the network at the claim', () => {
  beforeAll(async () => {
    rig = await createRig();
    // One root per stack, built (or found) before the VMs start side by side.
    await Promise.all(Object.values(PACKAGES).map((p) => rig.withPackages(p)));
    seen = { savable: savable(), running: { ifupdown: running('ifupdown'), networkd: running('networkd') }, osDisk: osDisk() };
    for (const p of [seen.savable, seen.osDisk, ...Object.values(seen.running)]) p.catch(() => undefined);
  }, 1_200_000);

  afterAll(async () => {
    if (seen) await Promise.allSettled([seen.savable, seen.osDisk, ...Object.values(seen.running)]);
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await rig?.cleanup();
  }, 300_000);

  it('Savable: the NIC deleted after the pool Ready, a new one on another subnet attached: leased, claimed, the customer provisioned, requests in order', async () => {
    const s = await seen.savable;
    const readies = s.requests.filter(isReady);
    const polls = s.requests.filter((r) => r.route === 'reprovision');
    expect(readies, s.story).toHaveLength(2);
    expect(polls.length, s.story).toBeGreaterThan(0);
    // The pool's Ready came before the NIC went; every poll only once the new NIC was there; the customer's Ready after the claim.
    expect(readies[0]!.receivedAt).toBeLessThan(s.detachedAt);
    expect(polls.every((p) => p.receivedAt >= s.attachedAt), s.story).toBe(true);
    expect(readies[1]!.receivedAt).toBeGreaterThan(polls.at(-1)!.receivedAt);
    expect(s.users).toContain('customer');
    expect(s.users).not.toContain('pooladmin');
    expect(s.addresses.eth0?.some((a) => a.startsWith('10.48.1.')), s.story).toBe(true);
    expect(s.unit, s.story).toMatch(/Result=success/);
    expect(s.unit).toMatch(/ExecMainStatus=0/);
    expect(s.kvp.map((r) => r.get('pps_type'))).toEqual(s.kvp.map(() => 'Savable'));
    expect(s.story).toMatch(/is the primary network interface: IMDS answers through it/);
  }, 1_200_000);

  for (const stack of ['ifupdown', 'networkd'] as const) {
    it(`Running (${stack}): the claim moves the NIC to another subnet; the VM ends on the new address and provisions`, async () => {
      const r = await seen.running[stack];
      const readies = r.requests.filter(isReady);
      expect(readies, r.story).toHaveLength(2);
      expect(readies[0]!.receivedAt).toBeLessThan(r.movedAt);
      expect(r.addresses.eth0?.some((a) => a.startsWith('10.49.1.')), r.story).toBe(true);
      expect(r.addresses.eth0?.some((a) => a.startsWith('10.49.0.')), r.story).toBe(false);
      expect(r.users).toContain('customer');
      expect(r.unit, r.story).toMatch(/Result=success/);
      // What the stack did, told in the log.
      expect(r.story).toMatch(stack === 'ifupdown' ? /lease on eth0: ifupdown: ifdown --force eth0, then ifup eth0/ : /networkd restarts DHCP on eth0/);
    }, 1_200_000);
  }

  it('OS disk: Ready to the pool, waits until powered off and exits 0 on the SIGTERM; the next boot reports PPS_NOT_SHUT_DOWN', async () => {
    const o = await seen.osDisk;
    expect(o.readyBeforePoweroff, o.story).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(o.markers.map((m) => m.split('.').at(-1))).toEqual(['waiting-for-shutdown']);
    expect(o.stopped, o.story).toBe('success exited 0');
    const failures = o.second.filter((r) => r.route === 'health' && r.body.includes('ProvisioningFailed'));
    expect(failures, o.story).toHaveLength(1);
    expect(failures[0]!.body).toContain('started again instead of being shut down');
    expect(o.second.filter(isReady)).toEqual([]);
  }, 1_200_000);
});
