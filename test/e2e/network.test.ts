/**
 * `bootstate network` end to end, without a booted OS: the built agent runs in a sandbox (its own /etc) inside a
 * network namespace where the fake fabric serves an IMDS document with a `network` section, and where the VM's NICs
 * are real interfaces: eth0 and eth1 (veth, the synthetic NICs' stand-ins: `drivers = ["veth"]`) and vf0, a macvlan
 * with eth0's MAC (another driver: the SR-IOV VF's stand-in). The stack is networkd, named in the
 * configuration (no networkd runs here: its reload is a warning, the primary's extra address is added by `ip`).
 * The booted tests (test/boot/network.test.ts) prove the live part on real stacks.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { decodeRecords } from '../../src/kvp/codec.js';
import { run } from '../../src/system/exec.js';
import { AGENT, startFabric, stopProcess } from './boot.js';
import { canSandbox, createNetns, createSandbox, runInSandbox, type Netns, type Sandbox } from './ns.js';

const TAG = `bsnet${process.pid % 10000}${randomBytes(2).toString('hex')}`;
const MAC0 = '00:0d:3a:10:00:01';
const MAC1 = '00:0d:3a:10:00:02';
// The sandbox lays its own /sys/class over the namespace's (DMI identity, no host disks); the namespace's interfaces,
// all virtual here, are listed where class/net's links lead.
const SYS_NET = '/sys/devices/virtual/net';
const imdsMac = (mac: string) => mac.replace(/:/g, '').toUpperCase();

function nic(mac: string, v4: string[], prefix: string, v6: string[] = []) {
  return {
    macAddress: imdsMac(mac),
    ipv4: { ipAddress: v4.map((a) => ({ privateIpAddress: a, publicIpAddress: '' })), subnet: [{ address: v4[0]!.replace(/\.\d+$/, '.0'), prefix }] },
    ipv6: { ipAddress: v6.map((a) => ({ privateIpAddress: a })), ...(v6.length ? { subnet: [{ address: 'fd00::', prefix: '64' }] } : {}) },
  };
}

const TWO_NICS = { interface: [nic(MAC0, ['10.61.0.4', '10.61.0.5'], '24', ['fd00::4', 'fd00::5']), nic(MAC1, ['10.61.1.4'], '24')] };
const NIC0_ONLY = { interface: [nic(MAC0, ['10.61.0.4', '10.61.0.5'], '24', ['fd00::4', 'fd00::5'])] };

const CONFIG = `[network]
stack = "networkd"
drivers = ["veth"]
[imds]
total_retry_timeout_secs = 6
retry_interval_secs = 1
[telemetry]
kvp = true
[log_path]
path = ""
`;

let sandbox: Sandbox;
let netns: Netns;
let fabric: ChildProcess | null = null;
const record = () => path.join(sandbox.root, 'fabric-requests.jsonl');

/** Serves `network` (or the scenario alone) from a fresh fabric in the namespace. */
async function serve(network: unknown, scenario = 'happy'): Promise<void> {
  if (fabric) await stopProcess(fabric);
  const doc = path.join(sandbox.root, 'imds-document.json');
  await writeFile(doc, JSON.stringify({ ...exampleImdsDocument(), ...(network === undefined ? {} : { network }) }));
  fabric = await startFabric(netns.name, scenario, record(), scenario === 'happy' ? doc : undefined);
}

async function runNetwork(): Promise<{ exitCode: number | null; log: Array<Record<string, unknown>>; stderr: string }> {
  const result = await runInSandbox(sandbox, [process.execPath, AGENT, 'network', '--log-format', 'json', '--sys-class-net', SYS_NET], { netns: netns.name, timeoutMs: 90_000, env: { BOOTSTATE_CONFIG: undefined } });
  const log = result.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { exitCode: result.exitCode, log, stderr: result.stderr };
}

const networkFiles = () => {
  const dir = sandbox.hostPath('/etc/systemd/network');
  return existsSync(dir) ? readdirSync(dir).sort() : [];
};
/** The values of the guest pool's records this run's telemetry wrote. */
const kvpValues = async () => {
  const pool = await readFile(sandbox.hostPath('/var/lib/hyperv/.kvp_pool_1')).catch(() => Buffer.alloc(0));
  return decodeRecords(pool, { lossy: true }).map((r) => r.value);
};
const addresses = async (dev: string) => (await run(['ip', '-n', netns.name, '-o', 'addr', 'show', 'dev', dev])).stdout;

describe.runIf(canSandbox)('bootstate network in a namespace, against the fake fabric', () => {
  beforeAll(async () => {
    sandbox = await createSandbox();
    await mkdir(sandbox.hostPath('/etc/bootstate'), { recursive: true });
    await writeFile(sandbox.hostPath('/etc/bootstate/bootstate.toml'), CONFIG);
    netns = await createNetns(TAG);
    const ip = (...args: string[]) => run(['ip', '-n', netns.name, ...args]);
    await ip('link', 'add', 'eth0', 'address', MAC0, 'type', 'veth', 'peer', 'name', 'peer0');
    await ip('link', 'add', 'eth1', 'address', MAC1, 'type', 'veth', 'peer', 'name', 'peer1');
    // This kernel has no dummy driver: a macvlan on eth0 with eth0's MAC is the VF's stand-in (another driver); the
    // kernel will not bring it up beside eth0 with the same address, and it need not be up to be seen.
    await ip('link', 'add', 'vf0', 'link', 'eth0', 'address', MAC0, 'type', 'macvlan');
    for (const dev of ['eth0', 'peer0', 'eth1', 'peer1']) await ip('link', 'set', dev, 'up');
    // The primary NIC's DHCP address, as the image's own client would have leased it.
    await ip('addr', 'add', '10.61.0.4/24', 'dev', 'eth0');
  });

  afterAll(async () => {
    if (fabric) await stopProcess(fabric);
    await netns?.delete();
    await sandbox?.cleanup();
  });

  it('renders each NIC for networkd, matched by MAC and driver, and never the VF that shares eth0\'s MAC', async () => {
    await serve(TWO_NICS);
    const { exitCode, log, stderr } = await runNetwork();
    expect(exitCode, stderr).toBe(0);
    const files = networkFiles();
    expect(files.length, files.join(' ')).toBe(2);
    const texts = await Promise.all(files.map((f) => readFile(sandbox.hostPath(`/etc/systemd/network/${f}`), 'utf8')));
    const [primary, secondary] = [texts.find((t) => t.toLowerCase().includes(MAC0))!, texts.find((t) => t.toLowerCase().includes(MAC1))!];
    expect(primary).toMatch(/Driver=veth/);
    expect(primary).toContain('10.61.0.5/24');
    expect(primary).toContain('fd00::5/64');
    expect(secondary).toMatch(/RouteMetric=200/);
    expect(secondary).toMatch(/UseDNS=(no|false)/);
    expect(texts.join('\n')).not.toContain('vf0');
    const messages = log.map((e) => String(e.msg));
    expect(messages.some((m) => m.includes('vf0') && m.includes('virtual function'))).toBe(true);
    // The primary's extra address is live; its DHCP address was never taken away.
    const eth0 = await addresses('eth0');
    expect(eth0).toContain('10.61.0.4/24');
    expect(eth0).toContain('10.61.0.5/24');
    expect(await addresses('vf0')).not.toContain('10.61');
    // The host hears the outcome without a login: one line in the KVP pool, naming the stack and the VF left alone.
    const outcome = (await kvpValues()).find((v) => v.includes('configured networkd'));
    expect(outcome, (await kvpValues()).join('\n')).toMatch(/eth0, eth1; left alone: vf0 \(VF\)/);
  });

  it('on the next boot, a NIC gone from IMDS loses bootstate\'s file; the other is left as it was', async () => {
    const before = networkFiles();
    await serve(NIC0_ONLY);
    const { exitCode, stderr } = await runNetwork();
    expect(exitCode, stderr).toBe(0);
    const after = networkFiles();
    expect(after.length).toBe(1);
    expect(before).toContain(after[0]);
  });

  it.each([
    ['missing', undefined],
    ['malformed', { interface: 'eth0' }],
    ['empty', { interface: [] }],
  ])('a %s network section keeps the image\'s configuration and bootstate\'s files, with a warning', async (_, network) => {
    const before = networkFiles();
    const doc = { ...exampleImdsDocument() } as Record<string, unknown>;
    delete doc.network;
    await writeFile(path.join(sandbox.root, 'imds-document.json'), JSON.stringify(network === undefined ? doc : { ...doc, network }));
    if (fabric) await stopProcess(fabric);
    fabric = await startFabric(netns.name, 'happy', record(), path.join(sandbox.root, 'imds-document.json'));
    const { exitCode, log, stderr } = await runNetwork();
    expect(exitCode, stderr).toBe(0);
    expect(networkFiles()).toEqual(before);
    expect(log.some((e) => e.level === 40 && String(e.msg).includes('kept'))).toBe(true);
  });

  it('with no network stack in the image: kept, a warning when IMDS asks for more than DHCP on eth0, info when not', async () => {
    const toml = sandbox.hostPath('/etc/bootstate/bootstate.toml');
    await writeFile(toml, CONFIG.replace('stack = "networkd"', 'stack = "auto"'));
    try {
      const before = networkFiles();
      await serve(TWO_NICS);
      const asked = await runNetwork();
      expect(asked.exitCode, asked.stderr).toBe(0);
      expect(asked.log.some((e) => e.level === 40 && String(e.msg).includes('no network stack to render for'))).toBe(true);
      await serve({ interface: [nic(MAC0, ['10.61.0.4'], '24')] });
      const plain = await runNetwork();
      expect(plain.exitCode, plain.stderr).toBe(0);
      expect(plain.log.filter((e) => e.level === 40)).toEqual([]);
      expect(plain.log.some((e) => e.level === 30 && String(e.msg).includes('no network stack to render for'))).toBe(true);
      expect(networkFiles()).toEqual(before);
    } finally {
      await writeFile(toml, CONFIG);
    }
  });

  it('IMDS that keeps failing ends the step within IMDS\'s total deadline, keeping everything', async () => {
    const before = networkFiles();
    await serve(undefined, 'imds-unavailable');
    const started = performance.now();
    const { exitCode, log, stderr } = await runNetwork();
    const seconds = (performance.now() - started) / 1000;
    expect(exitCode, stderr).toBe(0);
    // 6 s of deadline; the slack is Node's start on a loaded machine, not the deadline.
    expect(seconds).toBeLessThan(40);
    expect(networkFiles()).toEqual(before);
    expect(log.some((e) => String(e.msg).includes('IMDS'))).toBe(true);
  });
});
