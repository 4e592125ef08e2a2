/**
 * The hostname reaches the DHCP server on real Debian 12 boots where the image's own network manager holds a lease:
 * systemd-networkd in one VM, NetworkManager (in a root built with it) in another. The image was built with another
 * hostname and its client leased an address with that name before bootstate.service starts; the agent (from the
 * .deb, as a unit) must make the client send the metadata's name while eth0 keeps its address. Each VM has its own
 * dnsmasq in a namespace of its own; `ip monitor address` watches eth0 from before the boot to the end.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { DHCP_SUBNET, startDhcpServer, waitFor, watchAddresses, type DhcpServer } from '../e2e/dhcp-server.js';
import { canSandbox } from '../e2e/ns.js';
import { debianRoot, installDeb } from './debian-root.js';
import { createMachine, journal, type Machine } from './machine.js';
import { createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsn${process.pid}${randomBytes(2).toString('hex')}`;
const IMAGE_NAME = 'image-built';
const NEW_NAME = 'web-01';

type Client = 'networkd' | 'networkmanager';

/** What one boot showed. */
interface Seen {
  service: string;
  warnings: string[];
  publishLine: string;
  dhcpLog: string;
  dhcpEvents: string;
  addressAfter: string;
  monitored: string;
}

let rig: Rig;
const machines: Machine[] = [];
const servers: DhcpServer[] = [];
let seen: Record<Client, Promise<Seen>>;

const escaped = (text: string) => text.replace(/\./g, '\\.');

/** The image's network configuration: DHCP on eth0 through `client`, whose wait-online unit orders network-online. */
async function image(m: Machine, client: Client): Promise<void> {
  const put = async (p: string, text: string, mode = 0o644) => {
    await mkdir(path.dirname(m.diskPath(p)), { recursive: true });
    await writeFile(m.diskPath(p), text);
    await chmod(m.diskPath(p), mode);
  };
  const enable = async (unit: string, target: string) => {
    await mkdir(m.diskPath(`/etc/systemd/system/${target}.wants`), { recursive: true });
    await symlink(`/lib/systemd/system/${unit}`, m.diskPath(`/etc/systemd/system/${target}.wants/${unit}`));
  };
  await put('/etc/hostname', `${IMAGE_NAME}\n`);
  if (client === 'networkd') {
    await put('/etc/systemd/network/80-eth0.network', '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n');
    await enable('systemd-networkd.service', 'multi-user.target');
    await enable('systemd-networkd.socket', 'sockets.target');
    await enable('systemd-networkd-wait-online.service', 'network-online.target');
  } else {
    // A veth is unmanaged by NetworkManager's defaults; a VM's NIC is not.
    await put('/etc/NetworkManager/conf.d/90-eth0.conf', '[device-eth0]\nmatch-device=interface-name:eth0\nmanaged=1\n');
    await put(
      '/etc/NetworkManager/system-connections/eth0.nmconnection',
      '[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=auto\n\n[ipv6]\nmethod=ignore\n',
      0o600,
    );
  }
}

async function bootWith(client: Client, layers: string[]): Promise<Seen> {
  const machine = await createMachine({
    name: `${TAG}${client === 'networkd' ? 'd' : 'm'}`,
    workDir: rig.workDir,
    layers,
    imdsDocument: imdsDocument(rig.publicKey),
    capabilities: ['CAP_NET_ADMIN'],
  });
  machines.push(machine);
  await image(machine, client);
  const dhcp = await startDhcpServer(machine.netns, `${TAG}${client === 'networkd' ? 'd' : 'm'}`);
  servers.push(dhcp);
  const watch = watchAddresses(machine.netns);
  const boot = await machine.boot();
  await boot.settled();
  const service = (await boot.exec(['systemctl', 'show', 'bootstate.service', '-p', 'Result', '--value'])).stdout.trim();
  const messages = (await journal(boot, ['-b', '-u', 'bootstate.service'])).map((e) => e.MESSAGE ?? '');
  const warnings = (await journal(boot, ['-b', '-u', 'bootstate.service', '-p', 'warning'])).map((e) => e.MESSAGE ?? '');
  // The client's request is answered within the agent's run; dnsmasq's log may trail it by a moment.
  await waitFor(async () => (await dhcp.log()).includes(`client provides name: ${NEW_NAME}`), 20_000, 'a request with the new name').catch(async (error: Error) => {
    const units = await boot.exec(['journalctl', '--no-pager', '-b', '-u', 'bootstate.service', '-u', 'systemd-networkd.service', '-u', 'NetworkManager.service', '-o', 'cat']);
    throw new Error(`${client}: ${error.message}\n${units.stdout}\n${await dhcp.log()}`);
  });
  const addressAfter = (await run(['ip', '-n', machine.netns, '-4', '-o', 'addr', 'show', 'dev', 'eth0'])).stdout.match(/inet (\S+)/)?.[1] ?? '';
  const monitored = await watch.stop();
  await boot.shutdown();
  return {
    service,
    warnings,
    publishLine: messages.find((m) => m.includes('DHCP request on eth0')) ?? '',
    dhcpLog: await dhcp.log(),
    dhcpEvents: await dhcp.events(),
    addressAfter,
    monitored,
  };
}

describe.skipIf(!canSandbox)('Debian 12: the hostname reaches the DHCP server through the image\'s network manager', () => {
  beforeAll(async () => {
    rig = await createRig();
    const withNm = (async () => {
      const root = await debianRoot(['network-manager']);
      const layer = path.join(rig.workDir, 'deb-layer-nm');
      await installDeb(root, rig.deb!, layer);
      return [path.join(layer, 'upper'), root];
    })();
    seen = {
      networkd: bootWith('networkd', [rig.debLayer, rig.debian]),
      networkmanager: withNm.then((layers) => bootWith('networkmanager', layers)),
    };
    for (const p of Object.values(seen)) p.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    if (seen) await Promise.allSettled(Object.values(seen));
    for (const machine of machines) await machine.destroy().catch(() => undefined);
    for (const server of servers) await server.stop();
    await rig?.cleanup();
  }, 120_000);

  const how: Record<Client, string> = {
    networkd: 'systemd-networkd restarted',
    networkmanager: 'connection reapplied with the new DHCP hostname',
  };

  for (const client of ['networkd', 'networkmanager'] as const) {
    describe(client, () => {
      it('provisions with bootstate.service and logs no warning', async () => {
        const s = await seen[client];
        expect(s.service).toBe('success');
        expect(s.warnings).toEqual([]);
      }, 900_000);

      it('the client first leased an address with the image name', async () => {
        expect((await seen[client]).dhcpLog).toContain(`client provides name: ${IMAGE_NAME}`);
      }, 900_000);

      it('the agent made the client send the new name for the same address, and says how in the journal', async () => {
        const s = await seen[client];
        const address = s.addressAfter.split('/')[0]!;
        expect(address).toMatch(new RegExp(`^${escaped(DHCP_SUBNET)}\\.`));
        const later = s.dhcpLog.slice(s.dhcpLog.indexOf(`client provides name: ${NEW_NAME}`));
        expect(later).toMatch(new RegExp(`DHCPACK\\(\\S+\\) ${escaped(address)} \\S+ ${NEW_NAME}`));
        expect(s.dhcpEvents).toMatch(new RegExp(`^old \\S+ ${escaped(address)} ${NEW_NAME}$`, 'm'));
        expect(s.publishLine).toContain(`hostname ${NEW_NAME} sent in a DHCP request on eth0 (${how[client]}`);
      }, 900_000);

      it('eth0 kept its address throughout: nothing deleted, no release, one address from first lease to last', async () => {
        const s = await seen[client];
        expect(s.monitored).not.toMatch(/^Deleted/m);
        expect(s.dhcpLog).not.toContain('DHCPRELEASE');
        const added = [...s.monitored.matchAll(/^\d+: eth0\s+inet (\S+)/gm)].map((m) => m[1]);
        expect(new Set(added)).toEqual(new Set([s.addressAfter]));
      }, 900_000);
    });
  }
});
