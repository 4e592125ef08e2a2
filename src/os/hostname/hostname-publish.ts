/**
 * Publishing the hostname to Azure DNS (docs/hostname-publishing.md): Azure's DNS learns a VM's name from the host
 * name option (12) of its DHCP requests, so after the hostname step the DHCP client that manages the primary
 * interface is made to send a new request carrying the new name, keeping its address. Each backend first checks
 * that its client runs and manages the interface (from /proc and /run, dhcp-clients.ts); the first that does acts.
 *
 * - networkd: `systemctl restart systemd-networkd.service`. `networkctl renew` sends the name networkd read when it
 *   configured the link (systemd #23244, #36440) and `networkctl reconfigure` removes the address before adding it
 *   back; a restart keeps addresses and routes and starts the DHCP client with the current name.
 * - networkmanager: `nmcli device modify IFACE ipv4.dhcp-send-hostname yes ipv4.dhcp-hostname NAME`: a change of
 *   the applied connection only (the profile on disk stays), reapplied without taking the device down.
 * - dhclient: SIGTERM (not `-r`, which releases, nor `-x`, whose STOP hook flushes the address), then the same
 *   command line again with `-nw`; it asks for its old address (INIT-REBOOT) with `send host-name` from its config.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { HostnamePublishingBackendName } from '../../config/defaults.js';
import { BootstateError } from '../../core/errors.js';
import type { OsContext } from '../backends.js';
import {
  type ClientProcess,
  dhclientSendsHostname,
  interfaceIndex,
  networkdManages,
  networkManagerManages,
  parseDhclientArgs,
  primaryInterface,
  processesNamed,
} from './dhcp-clients.js';
import { isCommandMissing } from '../../system/exec.js';
import type { StepResult } from '../provisioner.js';

export interface PublishOptions {
  /** Where the running system's /proc, /sys and /run are read: `/` but in tests. */
  probeRoot: string;
  /** Absolute time (ms since the epoch) by which publishing gives up. */
  deadline: number;
  /** Whether to wait for what the commands did (process gone, new lease); a dry run only records the commands. */
  observe: boolean;
  /**
   * How a restarted dhclient runs under systemd: in a scope of its own (default: the first boot's, which outlives
   * bootstate.service), or as a transient service PID1 starts, outside a sandboxed caller (the monitor's cycle).
   */
  dhclientUnder?: 'scope' | 'service';
}

interface Request {
  iface: string;
  hostname: string;
  /** The running processes named `name` (15 bytes of it, as /proc keeps), from one scan shared by all backends. */
  running(name: string): Promise<ClientProcess[]>;
}

/** The DHCP client each backend looks for. */
const CLIENT_OF: Record<HostnamePublishingBackendName, string> = {
  networkd: 'systemd-networkd',
  networkmanager: 'NetworkManager',
  dhclient: 'dhclient',
};

/** A backend: null when its client does not manage the interface, else what it did. */
export type Publisher = (request: Request, context: OsContext, options: PublishOptions, signal: AbortSignal) => Promise<StepResult | null>;

const remaining = (options: PublishOptions) => Math.max(1, options.deadline - Date.now());

export const PUBLISHERS: Record<string, Publisher> = {
  networkd: async ({ iface, hostname, running }, context, options, signal) => {
    if ((await running(CLIENT_OF.networkd)).length === 0) return null;
    const index = await interfaceIndex(iface, options.probeRoot);
    if (index === null) return null;
    const run = path.join(options.probeRoot, 'run/systemd/netif');
    if (!networkdManages(await readFile(path.join(run, 'links', String(index)), 'utf8').catch(() => ''))) return null;
    const lease = path.join(run, 'leases', String(index));
    const before = await modified(lease);
    await context.run(['systemctl', 'restart', 'systemd-networkd.service'], { signal, timeoutMs: remaining(options) });
    return outcome('networkd', iface, hostname, 'systemd-networkd restarted', options.observe ? await renewed(lease, before, options, signal) : null);
  },

  networkmanager: async ({ iface, hostname, running }, context, options, signal) => {
    if ((await running(CLIENT_OF.networkmanager)).length === 0) return null;
    const index = await interfaceIndex(iface, options.probeRoot);
    if (index === null) return null;
    const state = await readFile(path.join(options.probeRoot, 'run/NetworkManager/devices', String(index)), 'utf8').catch(() => '');
    if (!networkManagerManages(state)) return null;
    await context.run(['nmcli', 'device', 'modify', iface, 'ipv4.dhcp-send-hostname', 'yes', 'ipv4.dhcp-hostname', hostname], {
      signal,
      timeoutMs: remaining(options),
    });
    return outcome('networkmanager', iface, hostname, 'connection reapplied with the new DHCP hostname', null);
  },

  dhclient: async ({ iface, hostname, running }, context, options, signal) => {
    // Its command line is run again as root: only a client root started may name what runs.
    const client = (await running(CLIENT_OF.dhclient)).find(({ argv, uid }) => {
      if (uid !== 0) return false;
      const args = parseDhclientArgs(argv);
      return !args.stopping && !args.ipv6 && !args.networkManager && (args.interfaces.length === 0 || args.interfaces.includes(iface));
    });
    if (!client) return null;
    const args = parseDhclientArgs(client.argv);
    const conf = await readFile(path.join(options.probeRoot, args.configFile), 'utf8').catch(() => '');
    if (!dhclientSendsHostname(conf)) {
      return {
        backend: 'dhclient',
        detail: 'hostname not published',
        warnings: [`hostname not published: dhclient (pid ${client.pid}) serves ${iface} but ${args.configFile} has no "send host-name", so a new request would carry no name`],
      };
    }
    const lease = path.join(options.probeRoot, args.leaseFile);
    const before = await modified(lease);
    await stop(client.pid, context, options, signal);
    const again = client.argv.includes('-nw') ? client.argv : [client.argv[0]!, '-nw', ...client.argv.slice(1)];
    // Under systemd the new client gets a scope of its own: in bootstate.service's cgroup it would die with the unit.
    const systemd = await stat(path.join(options.probeRoot, 'run/systemd/system')).then(() => true, () => false);
    const under = options.dhclientUnder === 'service' ? ['systemd-run', '--quiet', '--collect', '--property=Type=forking', '--'] : ['systemd-run', '--scope', '--quiet', '--'];
    await context.run(systemd ? [...under, ...again] : again, { signal, timeoutMs: remaining(options) });
    const detail = `dhclient (pid ${client.pid}) restarted without releasing its lease`;
    return outcome('dhclient', iface, hostname, detail, options.observe ? await renewed(lease, before, options, signal) : null);
  },
} satisfies Record<HostnamePublishingBackendName, Publisher>;

/**
 * Makes the DHCP client of the primary interface (the one with the default route) send `hostname`: the configured
 * backends in order, the first whose client manages the interface acting. None running is a warning, never an error.
 */
export async function publishHostname(
  hostname: string,
  backends: string[],
  context: OsContext,
  options: PublishOptions,
  signal: AbortSignal,
): Promise<StepResult> {
  const iface = await primaryInterface(options.probeRoot);
  // No routed interface means no DHCP network a name could be published on (not an Azure VM's network): not a warning.
  if (!iface) return { backend: 'none', detail: 'hostname not published: no interface has an IPv4 default route' };
  const warnings: string[] = [];
  // One pass over /proc finds every configured backend's client: a pass reads each process's comm.
  const clients = backends.flatMap((name) => (Object.hasOwn(CLIENT_OF, name) ? [CLIENT_OF[name as HostnamePublishingBackendName]] : []));
  let scan: Promise<ClientProcess[]> | undefined;
  const running = async (name: string) => {
    scan ??= processesNamed(clients, options.probeRoot);
    return (await scan).filter((p) => p.comm === name.slice(0, 15));
  };
  for (const name of backends) {
    const publisher = Object.hasOwn(PUBLISHERS, name) ? PUBLISHERS[name] : undefined;
    if (!publisher) {
      warnings.push(`hostname publishing: unknown backend ${name}`);
      continue;
    }
    const result = await publisher({ iface, hostname, running }, context, options, signal);
    if (result) return { ...result, warnings: [...warnings, ...(result.warnings ?? [])] };
  }
  warnings.push(`hostname not published: no running DHCP client (${backends.join(', ')}) manages ${iface}; Azure DNS keeps the name of the last DHCP request`);
  return { backend: 'none', detail: 'hostname not published', warnings };
}

function outcome(backend: string, iface: string, hostname: string, how: string, renewedLease: boolean | null): StepResult {
  const detail = `hostname ${hostname} sent in a DHCP request on ${iface} (${how}${renewedLease ? '; new lease received' : ''})`;
  if (renewedLease === false) {
    return { backend, detail, warnings: [`hostname publishing: ${how}, but no new lease on ${iface} before the deadline; the request may still be answered`] };
  }
  return { backend, detail };
}

/** SIGTERM to the client (kill(1) when present, so a dry run shows it), then waits for it to be gone. */
async function stop(pid: number, context: OsContext, options: PublishOptions, signal: AbortSignal): Promise<void> {
  try {
    await context.run(['kill', '-s', 'TERM', String(pid)], { signal, timeoutMs: remaining(options) });
  } catch (error) {
    if (!isCommandMissing(error)) throw error;
    process.kill(pid, 'SIGTERM');
  }
  if (!options.observe) return;
  while (await alive(pid, options.probeRoot)) {
    if (Date.now() >= options.deadline || signal.aborted) {
      throw new BootstateError('SUBPROCESS_FAILED', `dhclient (pid ${pid}) did not stop after SIGTERM`, { data: [['pid', String(pid)]] });
    }
    await pause(50);
  }
}

async function alive(pid: number, root: string): Promise<boolean> {
  const status = await readFile(path.join(root, 'proc', String(pid), 'status'), 'utf8').catch(() => null);
  return status !== null && !/^State:\s+Z/m.test(status);
}

async function modified(file: string): Promise<number | null> {
  return stat(file).then((s) => s.mtimeMs, () => null);
}

/** Whether `file` was written after `before` by the deadline: the client's record of an answered request. */
async function renewed(file: string, before: number | null, options: PublishOptions, signal: AbortSignal): Promise<boolean> {
  for (;;) {
    const now = await modified(file);
    if (now !== null && (before === null || now > before)) return true;
    if (Date.now() >= options.deadline || signal.aborted) return false;
    await pause(50);
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
