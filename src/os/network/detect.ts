/**
 * Which network stack the image uses, read from what it installs and enables under a root prefix, unless the
 * configuration names one (`[network] stack`).
 *
 * Order of preference, first found wins:
 * 1. netplan: /usr/sbin/netplan and a YAML file in /etc/netplan. netplan renders for networkd or NetworkManager
 *    itself, so an image with netplan is configured through netplan even though one of those two is enabled too;
 *    except where its YAML says `renderer: NetworkManager`: netplan refuses to match a NetworkManager definition by
 *    driver, so such an image gets NetworkManager keyfiles (which NetworkManager reads beside netplan's profiles).
 * 2. NetworkManager: NetworkManager.service enabled (a `*.wants/` link in /etc/systemd/system, or in
 *    /usr/lib/systemd/system where a distribution enables it statically), not masked. It comes before networkd
 *    because where both are enabled NetworkManager manages the ethernet devices.
 * 3. systemd-networkd: systemd-networkd.service enabled the same way, not masked.
 * 4. ifupdown: /sbin/ifup (or /usr/sbin/ifup) and an /etc/network/interfaces that configures something beyond `lo`
 *    (an `auto`/`allow-hotplug` line or `iface` stanza for another interface, or a `source` line). Last, because
 *    Debian images often keep ifupdown installed with only `lo` while another stack does the work.
 * None of these: no stack, and why.
 */
import type { StackName } from './types.js';
import { lstat } from 'node:fs/promises';
import { masked } from '../../system/image-files.js';
import { resolveInRoot } from '../../system/paths.js';
import { listDir, readText } from './common.js';
import { netplanRenderer } from './netplan.js';

export interface Detection {
  stack: StackName | null;
  why: string;
}

/** Whether `path` is there in the image, a link counting as itself (a `*.wants/` link enables whatever it names). */
async function exists(root: string, path: string): Promise<boolean> {
  try {
    await lstat(resolveInRoot(root, path, { followLast: false }));
    return true;
  } catch {
    return false;
  }
}

async function isMasked(root: string, unit: string): Promise<boolean> {
  for (const dir of ['/etc/systemd/system', '/run/systemd/system']) if (await masked(root, `${dir}/${unit}`)) return true;
  return false;
}

/** The `*.wants/<unit>` link enabling `unit`, or null. */
export async function enabledBy(root: string, unit: string): Promise<string | null> {
  if (await isMasked(root, unit)) return null;
  for (const dir of ['/etc/systemd/system', '/usr/lib/systemd/system', '/lib/systemd/system']) {
    for (const wants of (await listDir(root, dir)).filter((n) => n.endsWith('.wants'))) {
      if (await exists(root, `${dir}/${wants}/${unit}`)) return `${dir}/${wants}/${unit}`;
    }
  }
  return null;
}

async function firstExisting(root: string, paths: string[]): Promise<string | null> {
  for (const p of paths) if (await exists(root, p)) return p;
  return null;
}

async function netplan(root: string): Promise<Detection | null> {
  const bin = await firstExisting(root, ['/usr/sbin/netplan', '/sbin/netplan']);
  const yaml = (await listDir(root, '/etc/netplan')).filter((n) => /\.ya?ml$/.test(n));
  if (!bin || yaml.length === 0) return null;
  const why = `${bin} is installed and /etc/netplan has ${yaml.join(', ')}`;
  const { renderer, file } = await netplanRenderer(root);
  if (renderer !== 'NetworkManager') return { stack: 'netplan', why };
  return {
    stack: 'networkmanager',
    why: `${why}, but ${file ?? ''} makes netplan render for NetworkManager, where netplan cannot match by driver`,
  };
}

async function unit(root: string, name: string): Promise<string | null> {
  const link = await enabledBy(root, name);
  return link ? `${name} is enabled (${link})` : null;
}

/** Whether an interfaces file configures more than the loopback interface. */
export function configuresBeyondLoopback(text: string): boolean {
  return text.split('\n').some((raw) => {
    const words = raw.replace(/#.*/, '').trim().split(/\s+/);
    if (words[0] === 'source' || words[0] === 'source-directory') return true;
    if (words[0] === 'iface') return words[1] !== undefined && words[1] !== 'lo';
    if (words[0] === 'auto' || words[0]?.startsWith('allow-')) return words.slice(1).some((w) => w !== 'lo');
    return false;
  });
}

async function ifupdown(root: string): Promise<string | null> {
  const bin = await firstExisting(root, ['/sbin/ifup', '/usr/sbin/ifup']);
  const text = await readText(root, '/etc/network/interfaces');
  return bin && text !== null && configuresBeyondLoopback(text)
    ? `${bin} is installed and /etc/network/interfaces configures more than lo`
    : null;
}

const PROBES: Array<[StackName, (root: string) => Promise<string | null>]> = [
  ['networkmanager', (root) => unit(root, 'NetworkManager.service')],
  ['networkd', (root) => unit(root, 'systemd-networkd.service')],
  ['ifupdown', ifupdown],
];

/** The stack to render for: the configured one, else the first the image shows (see the order above). */
export async function detectStack(root: string, override: 'auto' | StackName): Promise<Detection> {
  if (override !== 'auto') return { stack: override, why: `configured: [network] stack = "${override}"` };
  const viaNetplan = await netplan(root);
  if (viaNetplan) return viaNetplan;
  for (const [stack, probe] of PROBES) {
    const why = await probe(root);
    if (why !== null) return { stack, why };
  }
  return {
    stack: null,
    why: 'none found: no netplan with YAML in /etc/netplan, NetworkManager.service and systemd-networkd.service not enabled, no ifupdown configuration beyond lo',
  };
}
