/**
 * The hostname reaches the DHCP server on a real Debian 12 boot where systemd-networkd manages eth0: the image was
 * built with another hostname, networkd leases an address with it before bootstate.service starts, and the agent
 * (from the .deb, as a unit) must make networkd send the metadata's name while eth0 keeps its address. dnsmasq in a
 * namespace of its own is the DHCP server; `ip monitor address` watches eth0 from before the boot to the end.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/os/exec.js';
import { DHCP_SUBNET, startDhcpServer, waitFor, watchAddresses, type DhcpServer } from '../e2e/dhcp-server.js';
import { canSandbox } from '../e2e/ns.js';
import { createMachine, journal, type Boot, type Machine } from './machine.js';
import { createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsn${process.pid}${randomBytes(2).toString('hex')}`;
const IMAGE_NAME = 'image-built';
const NEW_NAME = 'web-01';

let rig: Rig;
let machine: Machine;
let dhcp: DhcpServer;
let boot: Boot;
let monitored = '';
let addressAfter = '';
let publishLine = '';
let warnings: string[] = [];
let service = '';

const escaped = (text: string) => text.replace(/\./g, '\\.');

/** The image: networkd enabled with DHCP on eth0 (and wait-online, so network-online.target means a lease). */
async function networkdImage(m: Machine): Promise<void> {
  const put = async (p: string, text: string) => {
    await mkdir(path.dirname(m.diskPath(p)), { recursive: true });
    await writeFile(m.diskPath(p), text);
  };
  const enable = async (unit: string, target: string) => {
    await mkdir(m.diskPath(`/etc/systemd/system/${target}.wants`), { recursive: true });
    await symlink(`/lib/systemd/system/${unit}`, m.diskPath(`/etc/systemd/system/${target}.wants/${unit}`));
  };
  await put('/etc/systemd/network/80-eth0.network', '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n');
  await put('/etc/hostname', `${IMAGE_NAME}\n`);
  await enable('systemd-networkd.service', 'multi-user.target');
  await enable('systemd-networkd.socket', 'sockets.target');
  await enable('systemd-networkd-wait-online.service', 'network-online.target');
}

describe.skipIf(!canSandbox)('Debian 12 with systemd-networkd: the hostname reaches the DHCP server', () => {
  beforeAll(async () => {
    rig = await createRig();
    machine = await createMachine({
      name: TAG,
      workDir: rig.workDir,
      layers: [rig.debLayer, rig.debian],
      imdsDocument: imdsDocument(rig.publicKey),
      capabilities: ['CAP_NET_ADMIN'],
    });
    await networkdImage(machine);
    dhcp = await startDhcpServer(machine.netns, TAG);
    const watch = watchAddresses(machine.netns);
    boot = await machine.boot();
    await boot.settled();
    service = (await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'Result', '--value'])).stdout.trim();
    const entries = await journal(boot, ['-b', '-u', 'bootstate.service']);
    publishLine = entries.map((e) => e.MESSAGE ?? '').find((m) => m.includes('DHCP request on eth0')) ?? '';
    warnings = (await journal(boot, ['-b', '-u', 'bootstate.service', '-p', 'warning'])).map((e) => e.MESSAGE ?? '');
    // The restarted networkd's request is answered within the agent's run; the lease is written just after.
    await waitFor(async () => (await dhcp.log()).includes(`client provides name: ${NEW_NAME}`), 20_000, 'a request with the new name').catch(async (error: Error) => {
      const unit = await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate.service', '-u', 'systemd-networkd.service', '-o', 'cat']);
      throw new Error(`${error.message}\n${unit.stdout}\n${await dhcp.log()}`);
    });
    addressAfter = (await run(['ip', '-n', machine.netns, '-4', '-o', 'addr', 'show', 'dev', 'eth0'])).stdout.match(/inet (\S+)/)?.[1] ?? '';
    monitored = await watch.stop();
  }, 900_000);

  afterAll(async () => {
    await machine?.destroy().catch(() => undefined);
    await dhcp?.stop();
    await rig?.cleanup();
  }, 120_000);

  it('provisions with bootstate.service and logs no warning', () => {
    expect(service).toBe('success');
    expect(warnings).toEqual([]);
  }, 300_000);

  it('networkd first leased an address with the image name', async () => {
    expect(await dhcp.log()).toContain(`client provides name: ${IMAGE_NAME}`);
  });

  it('the agent made networkd send the new name for the same address, and says so in the journal', async () => {
    const log = await dhcp.log();
    const later = log.slice(log.indexOf(`client provides name: ${NEW_NAME}`));
    const address = addressAfter.split('/')[0]!;
    expect(address).toMatch(new RegExp(`^${escaped(DHCP_SUBNET)}\\.`));
    expect(later).toMatch(new RegExp(`DHCPACK\\(\\S+\\) ${escaped(address)} \\S+ ${NEW_NAME}`));
    expect(await dhcp.events()).toMatch(new RegExp(`^old \\S+ ${escaped(address)} ${NEW_NAME}$`, 'm'));
    expect(publishLine).toContain(`hostname ${NEW_NAME} sent in a DHCP request on eth0 (systemd-networkd restarted`);
  });

  it('eth0 kept its address throughout: nothing deleted, no release, one address from first lease to last', async () => {
    expect(monitored).not.toMatch(/^Deleted/m);
    expect(await dhcp.log()).not.toContain('DHCPRELEASE');
    const added = [...monitored.matchAll(/^\d+: eth0\s+inet (\S+)/gm)].map((m) => m[1]);
    expect(new Set(added)).toEqual(new Set([addressAfter]));
  });
});
