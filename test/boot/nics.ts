/**
 * A booted VM with several NICs: each NIC is a veth pair whose VM end (eth0, eth1, … with the MAC IMDS lists) is
 * cabled to a DHCP server of its own (test/e2e/dhcp-server.ts, one namespace and subnet per NIC) that leases the
 * NIC's first listed IPv4 address (and its first IPv6 address by DHCPv6, with router advertisements); an SR-IOV
 * virtual function's stand-in is a VXLAN link with a NIC's MAC (same MAC, another driver); and the IMDS
 * document's `network.interface[]` lists the NICs as Azure does.
 */
import { mkdir, symlink } from 'node:fs/promises';
import { run } from '../../src/system/exec.js';
import { startDhcpServer, type DhcpServer } from '../e2e/dhcp-server.js';
import type { Machine } from './machine.js';

export interface NicSpec {
  /** The interface's name inside the VM: eth0 for the primary. */
  name: string;
  /** `00:0d:3a:…`, lower case with colons. */
  mac: string;
  /** The /24 the NIC's network uses, as three octets (`10.77.1`). */
  subnet: string;
  /** IMDS's `privateIpAddress`es in order: the first comes by DHCP, the others are static. */
  ipv4: string[];
  /** IMDS's IPv6 addresses: the first by DHCPv6, the others static (all in fd77:…:n::/64). */
  ipv6?: string[];
}

/** Cables `nic` into the VM's namespace with a DHCP server behind it; `tag` keeps link and namespace names unique. */
export function cableNic(vmNetns: string, tag: string, nic: NicSpec): Promise<DhcpServer> {
  return startDhcpServer(vmNetns, `${tag}${nic.name}`, nic.mac, {
    name: nic.name,
    subnet: nic.subnet,
    address: nic.ipv4[0],
    address6: nic.ipv6?.[0],
  });
}

/**
 * Adds the stand-in of a VF: a link named `name` (Azure names its VFs like `enP1s1`) carrying `mac`, up, with a
 * carrier, of another kind than the NICs' veth. It is a VXLAN link with no remote: the host kernel has no `dummy`
 * (no modules at all), and a VXLAN link, unlike a bridge without ports, has a carrier once up, so a stack told to
 * configure it would.
 */
export async function addVirtualFunction(vmNetns: string, name: string, mac: string): Promise<void> {
  await run(['ip', '-n', vmNetns, 'link', 'add', name, 'address', mac, 'type', 'vxlan', 'id', '1', 'dstport', '4789']);
  await run(['ip', '-n', vmNetns, 'link', 'set', name, 'up']);
}

/** Takes NIC `name` out of the VM (the VM end of its cable is deleted, and with it the whole veth pair). */
export async function unplugNic(vmNetns: string, name: string): Promise<void> {
  await run(['ip', '-n', vmNetns, 'link', 'del', name]);
}

/**
 * What a reboot does to the VM's NICs: every interface but `lo` (whose addresses are the fabric's) is set down and
 * loses its addresses, so the next boot starts from links without configuration as a VM's does, not from what the
 * previous boot's stack left in the namespace that outlives it. `keepUp` (the VF stand-in) stays up, without addresses.
 */
export async function resetNics(vmNetns: string, keepUp: string[] = []): Promise<void> {
  const links = (await run(['ip', '-n', vmNetns, '-o', 'link', 'show'])).stdout;
  for (const [, name] of links.matchAll(/^\d+:\s+([^:@\s]+)/gm)) {
    if (name === 'lo') continue;
    if (!keepUp.includes(name!)) await run(['ip', '-n', vmNetns, 'link', 'set', name!, 'down']);
    await run(['ip', '-n', vmNetns, 'addr', 'flush', 'dev', name!]);
  }
}

/** IMDS's `network` section for `nics`, in their order (the first is the primary). */
export function networkSection(nics: NicSpec[]): { interface: unknown[] } {
  return {
    interface: nics.map((nic) => ({
      ipv4: {
        ipAddress: nic.ipv4.map((address) => ({ privateIpAddress: address, publicIpAddress: '' })),
        subnet: [{ address: `${nic.subnet}.0`, prefix: '24' }],
      },
      ipv6: { ipAddress: (nic.ipv6 ?? []).map((address) => ({ privateIpAddress: address })) },
      macAddress: nic.mac.replace(/:/g, '').toUpperCase(),
    })),
  };
}

/** `doc` (an IMDS document, e.g. scenario.ts's imdsDocument) with `nics` as its network section. */
export function withNetwork<T extends Record<string, unknown>>(doc: T, nics: NicSpec[]): T {
  return { ...doc, network: networkSection(nics) };
}

/** What `ip -o addr` shows in the VM's namespace: `name → ['10.77.0.10/24', 'fd77::10/128', …]` (link-local left out). */
export async function addressesByName(vmNetns: string): Promise<Record<string, string[]>> {
  const out = (await run(['ip', '-n', vmNetns, '-o', 'addr', 'show'])).stdout;
  const seen: Record<string, string[]> = {};
  for (const [, name, address] of out.matchAll(/^\d+:\s+(\S+)\s+inet6?\s+(\S+)(.*)$/gm)) {
    if (address!.startsWith('fe80:') || name === 'lo') continue;
    (seen[name!] ??= []).push(address!);
  }
  return seen;
}

/** The default IPv4 route with the lowest metric: the interface it leaves by, or null when there is none. */
export async function defaultRouteDevice(vmNetns: string): Promise<string | null> {
  const out = (await run(['ip', '-n', vmNetns, '-4', 'route', 'show', 'default'])).stdout;
  const routes = [...out.matchAll(/^default via \S+ dev (\S+)(?:.*metric (\d+))?/gm)].map((m) => ({ dev: m[1]!, metric: Number(m[2] ?? 0) }));
  routes.sort((a, b) => a.metric - b.metric);
  return routes[0]?.dev ?? null;
}

/** Enables systemd-networkd, its socket and its wait-online in the image, as an image built on networkd has them. */
export async function enableNetworkd(m: Machine): Promise<void> {
  for (const [unit, target] of [
    ['systemd-networkd.service', 'multi-user.target'],
    ['systemd-networkd.socket', 'sockets.target'],
    ['systemd-networkd-wait-online.service', 'network-online.target'],
  ] as const) {
    await mkdir(m.diskPath(`/etc/systemd/system/${target}.wants`), { recursive: true });
    await symlink(`/lib/systemd/system/${unit}`, m.diskPath(`/etc/systemd/system/${target}.wants/${unit}`));
  }
}
