/**
 * A hostname changed after the first boot reaches the DHCP server (Azure DNS) once, from the monitor's timer cycles
 * (`bootstate monitor --once`), as WALinuxAgent's MonitorHostName does. Real parts as in hostname-publish.test.ts:
 * the VM's namespace has an `eth0` whose other end is dnsmasq's, ISC dhclient holds a lease, and the fake fabric
 * answers the cycle's HealthService requests on Azure's addresses. Each cycle runs in a fresh UTS namespace whose
 * name comes from the VM's /etc/hostname, so changing that file is changing the VM's hostname.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVm, type BootResult, type Vm } from './boot.js';
import { dhclientAlive, dhclientPid, killDhclients, startDhcpServer, startImageDhclient, waitFor, type DhcpServer } from './dhcp-server.js';
import { assertNamespaces, canSandbox } from './ns.js';

const IMAGE_NAME = 'image-built';
const RENAMED = 'renamed-02';
const AGAIN = 'renamed-03';
const PUBLISHED = '/var/lib/bootstate/published-hostname';
const OFF_CONFIG = '/etc/bootstate-monitor-off.toml';

const tag = `${process.pid}${Math.random().toString(36).slice(2, 6)}`;

let vm: Vm;
let dhcp: DhcpServer | null = null;
let firstClientPid = 0;
let before: string[] = [];
const cycles: Array<BootResult & { provides: string[]; clientPid: number; published: string }> = [];

const clientPid = () => dhclientPid(vm);
/** Every name the DHCP server was given, in order. */
const provided = async () => [...(await dhcp!.log()).matchAll(/client provides name: (\S+)/g)].map((m) => m[1]!);

async function cycle(args: string[] = []): Promise<void> {
  const result = await vm.boot(['monitor', '--once', ...args]);
  // A restarted client writes its pid file once it has daemonized: wait for a live one.
  await waitFor(async () => dhclientAlive(await clientPid()), 30_000, 'a running dhclient with its pid file');
  const clientNow = await clientPid();
  cycles.push({ ...result, provides: await provided(), clientPid: clientNow, published: (await readFile(vm.sandbox.hostPath(PUBLISHED), 'utf8').catch(() => '')).trim() });
}

beforeAll(async () => {
  if (!canSandbox) return;
  vm = await createVm(`bs-hmon-${tag}`, { hostname: IMAGE_NAME });
  dhcp = await startDhcpServer(vm.netns.name, tag);
  firstClientPid = await startImageDhclient(vm);
  before = await provided();
  await writeFile(vm.sandbox.hostPath(OFF_CONFIG), '[hostname_publishing]\nmonitor = false\n');

  await cycle(); // 0: the first cycle takes the current name as published
  await writeFile(vm.sandbox.hostPath('/etc/hostname'), `${RENAMED}\n`);
  await cycle(); // 1: a changed name: published
  await cycle(); // 2: unchanged since: nothing
  await writeFile(vm.sandbox.hostPath('/etc/hostname'), `${AGAIN}\n`);
  await cycle(['--config', OFF_CONFIG]); // 3: changed, but monitoring is off
}, 300_000);

afterAll(async () => {
  if (vm) await killDhclients(vm, [firstClientPid]);
  await dhcp?.stop();
  await vm?.shutdown();
  await vm?.sandbox.cleanup();
}, 60_000);

describe('a later hostname change reaches the DHCP server from a monitor cycle', () => {
  it('runs where namespaces and the DHCP tools are available, and every cycle posts its observations', async () => {
    assertNamespaces();
    for (const c of cycles) expect(c.stderr).not.toContain('monitor failed');
    const posts = (await vm.requests()).filter((r) => r.route === 'healthService');
    expect(posts.length).toBeGreaterThanOrEqual(cycles.length);
  });

  it('the first cycle records the name the first boot published and sends nothing', () => {
    expect(cycles[0]!.published).toBe(IMAGE_NAME);
    expect(cycles[0]!.clientPid).toBe(firstClientPid);
    expect(before.length).toBeGreaterThan(0);
    expect(new Set(before)).toEqual(new Set([IMAGE_NAME]));
    expect(cycles[0]!.provides).toEqual(before);
  });

  it('a changed name goes out once, in a DHCP request from a restarted client, and is recorded', () => {
    expect(cycles[1]!.published).toBe(RENAMED);
    expect(cycles[1]!.clientPid).not.toBe(firstClientPid);
    expect(cycles[1]!.provides.at(-1)).toBe(RENAMED);
    expect(cycles[1]!.provides.slice(before.length).every((name) => name === RENAMED)).toBe(true);
  });

  it('the next cycle, with the name unchanged, leaves the client alone', () => {
    expect(cycles[2]!.clientPid).toBe(cycles[1]!.clientPid);
    expect(cycles[2]!.provides).toEqual(cycles[1]!.provides);
  });

  it('with [hostname_publishing] monitor = false a change is neither sent nor recorded', () => {
    expect(cycles[3]!.clientPid).toBe(cycles[2]!.clientPid);
    expect(cycles[3]!.provides).toEqual(cycles[2]!.provides);
    expect(cycles[3]!.published).toBe(RENAMED);
  });
});
