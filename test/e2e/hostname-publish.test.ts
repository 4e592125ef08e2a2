/**
 * The hostname reaches the DHCP server, which is how Azure's DNS learns it, with real parts: the VM's network
 * namespace gets an `eth0` whose other end is in a second namespace where dnsmasq serves DHCP (logging every
 * request with the name the client provides, and calling a script on every lease change). ISC dhclient, started in
 * the VM's sandbox with the image's hostname, holds a lease when the agent boots with no endpoint overrides. The
 * agent must make that client send the new name while the interface keeps its address: `ip monitor address` runs
 * from before the boot to after it and must see no address deleted, and dnsmasq must see no DHCPRELEASE.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { decodeRecords } from '../../src/kvp/codec.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { createVm, type BootResult, type Vm } from './boot.js';
import {
  DHCLIENT_LEASE_FILE as LEASE_FILE, DHCLIENT_PID_FILE as PID_FILE, DHCP_SUBNET, dhclientAlive as alive, dhclientPid, killDhclients, startDhcpServer,
  startImageDhclient, waitFor, watchAddresses, type DhcpServer,
} from './dhcp-server.js';
import { assertNamespaces, canSandbox } from './ns.js';

const IMAGE_NAME = 'image-built';
/** The happy scenario's computerName. */
const NEW_NAME = 'web-01';
const DRY_RUN_DIR = '/run/bootstate-dry-run';
const NO_CLIENT_DIR = '/run/bootstate-dry-run-no-client';

const tag = `${process.pid}${Math.random().toString(36).slice(2, 6)}`;

let vm: Vm;
let dhcp: DhcpServer | null = null;
let monitored = '';
let firstClientPid = 0;
let addressBefore = '';
let dryRun: BootResult;
let dryRunClientPid = 0;
let boot: BootResult;
let addressAfter = '';
let restartedPid = 0;
let restartedAlive = false;
let firstAliveAfter = true;
let noClient: BootResult;
let addressWithoutClient = '';

const inVm = (argv: string[]) => run(['ip', 'netns', 'exec', vm.netns.name, ...argv], { allowFailure: true });
const ipv4Of = async () => (await inVm(['ip', '-4', '-o', 'addr', 'show', 'dev', 'eth0'])).stdout.match(/inet (\S+)/)?.[1] ?? '';
const clientPid = () => dhclientPid(vm);
const escaped = (text: string) => text.replace(/\./g, '\\.');

beforeAll(async () => {
  if (!canSandbox) return;
  vm = await createVm(`bs-dhcp-${tag}`, { hostname: IMAGE_NAME });
  dhcp = await startDhcpServer(vm.netns.name, tag);
  firstClientPid = await startImageDhclient(vm);
  addressBefore = await ipv4Of();

  const watch = watchAddresses(vm.netns.name);
  dryRun = await vm.boot(['provision', '--dry-run', DRY_RUN_DIR]);
  dryRunClientPid = await clientPid();
  boot = await vm.boot();
  addressAfter = await ipv4Of();
  monitored = await watch.stop();

  // The client gone (SIGKILL: no release, the address stays), a dry run finds nobody to publish through.
  restartedPid = await clientPid();
  restartedAlive = await alive(restartedPid);
  firstAliveAfter = await alive(firstClientPid);
  if (restartedAlive) process.kill(restartedPid, 'SIGKILL');
  // Until the killed client is gone, the next dry run could still find it: wait for that, and fail if it never is
  // (this loop used to give up after 2 s and go on regardless).
  await waitFor(async () => !(await alive(restartedPid)), 30_000, `the killed dhclient (pid ${restartedPid}) to be gone`);
  addressWithoutClient = await ipv4Of();
  noClient = await vm.boot(['provision', '--dry-run', NO_CLIENT_DIR]);
}, 240_000);

afterAll(async () => {
  if (vm) await killDhclients(vm, [firstClientPid]);
  await dhcp?.stop();
  await vm?.shutdown();
  await vm?.sandbox.cleanup();
}, 60_000);

describe('the hostname reaches the DHCP server (Azure DNS)', () => {
  it('runs where namespaces and the DHCP tools are available', () => {
    assertNamespaces();
    expect(addressBefore).toMatch(new RegExp(`^${escaped(DHCP_SUBNET)}\\.\\d+/24$`));
    expect(boot.exitCode, boot.stderr).toBe(0);
  });

  it('the image name went out first: the server saw it before the agent ran', async () => {
    expect(await dhcp!.log()).toContain(`client provides name: ${IMAGE_NAME}`);
  });

  it('a dry run prints the exact commands and leaves the client alone', async () => {
    expect(dryRun.exitCode, dryRun.stderr).toBe(0);
    const commands = dryRun.stdout.slice(dryRun.stdout.indexOf('commands the real backend would run:'));
    expect(commands).toContain(`  kill -s TERM ${firstClientPid}\n`);
    expect(commands).toContain(`  dhclient -nw -4 -v -pf ${PID_FILE} -lf ${LEASE_FILE} eth0\n`);
    expect(dryRunClientPid).toBe(firstClientPid);
  });

  it('the server saw the new hostname in a DHCPREQUEST for the same address, and the lease now carries it', async () => {
    const log = await dhcp!.log();
    const after = log.slice(log.lastIndexOf(`client provides name: ${IMAGE_NAME}`));
    expect(after).toContain(`client provides name: ${NEW_NAME}`);
    const address = addressBefore.split('/')[0]!;
    expect(after).toMatch(new RegExp(`DHCPREQUEST\\(\\S+\\) ${escaped(address)} `));
    expect(after).toMatch(new RegExp(`DHCPACK\\(\\S+\\) ${escaped(address)} \\S+ ${NEW_NAME}`));
    expect(await dhcp!.events()).toMatch(new RegExp(`^old \\S+ ${escaped(address)} ${NEW_NAME}$`, 'm'));
    expect(await dhcp!.leases()).toContain(` ${address} ${NEW_NAME} `);
  });

  it('the interface kept its address throughout: nothing deleted, no release', async () => {
    expect(addressAfter).toBe(addressBefore);
    expect(monitored).not.toMatch(/^Deleted/m);
    expect(await dhcp!.log()).not.toContain('DHCPRELEASE');
  });

  it('a new client serves the interface, started from the old one\'s command line, and the log names the backend', async () => {
    expect(restartedPid).not.toBe(firstClientPid);
    expect(restartedAlive).toBe(true);
    expect(firstAliveAfter).toBe(false);
    const line = boot.stderr.split('\n').find((l) => l.includes('"step":"hostnamePublish"') && l.includes('"backend":"dhclient"'));
    expect(line).toBeDefined();
    expect(line, boot.stderr).toContain(`hostname ${NEW_NAME} sent in a DHCP request on eth0`);
    expect(line).toContain('new lease received');
  });

  it('with no client running, the run still provisions and says why the name was not published, in the log and in KVP', async () => {
    expect(addressWithoutClient).toBe(addressBefore);
    expect(noClient.exitCode, noClient.stderr).toBe(0);
    const warning = 'hostname not published: no running DHCP client (networkd, networkmanager, dhclient) manages eth0';
    const line = noClient.stderr.split('\n').find((l) => l.includes(warning));
    expect(line, noClient.stderr).toContain('"level":40');
    const pool = await readFile(vm.sandbox.hostPath(path.join(NO_CLIENT_DIR, 'var/lib/hyperv/.kvp_pool_1')));
    expect(decodeRecords(pool, { lossy: true }).some((r) => r.value.includes(warning))).toBe(true);
  });
});
