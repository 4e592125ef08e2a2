/**
 * The kernel's link events, for a Savable pool VM's waits (docs/preprovisioned.md): the host detaching its NIC, then
 * hot-attaching the customer's, and a Running or Savable VM's claim moving its NIC (the carrier down and up again).
 * One `ip -o monitor link` child per wait is the event stream (rtnetlink's link
 * group, one record a line); nothing polls `ip link` in a loop. The monitor starts before the links present are
 * listed, so a change between the two is never missed. Each wait ends when its AbortSignal aborts, the child killed.
 */
import { spawn } from 'node:child_process';
import { BootstateError } from '../../core/errors.js';

/** One link record as `ip -o link` / `ip -o monitor link` prints it. */
export interface LinkRecord {
  /** `Deleted` records: the link is gone. */
  deleted: boolean;
  index: number;
  name: string;
  /** The Ethernet address (`link/ether`), or null for other link types (loopback, tunnels). */
  mac: string | null;
  /** The interface it is enslaved to (`master X`): an SR-IOV VF under its synthetic NIC, a bridge port. */
  master: string | null;
  flags: string[];
}

const RECORD = /^(Deleted )?(\d+): ([^:@\s]+)(?:@[^:\s]*)?: <([^>]*)>(.*)$/;

/**
 * Parses one line, or null when it is not a link record.
 *
 * @example
 *   parseLinkLine('Deleted 3: eth0: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN \    link/ether 00:0d:3a:00:00:01 brd ff:ff:ff:ff:ff:ff')
 *   // { deleted: true, index: 3, name: 'eth0', mac: '00:0d:3a:00:00:01', master: null, flags: ['BROADCAST', 'MULTICAST'] }
 */
export function parseLinkLine(line: string): LinkRecord | null {
  const m = RECORD.exec(line.trim());
  if (!m) return null;
  const rest = m[5]!;
  const mac = /link\/ether ([0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5})/.exec(rest)?.[1]?.toLowerCase() ?? null;
  const master = /\smaster (\S+)/.exec(rest)?.[1] ?? null;
  return { deleted: !!m[1], index: Number(m[2]), name: m[3]!, mac, master, flags: m[4] ? m[4].split(',') : [] };
}

/** An Ethernet NIC of its own (not a port of another): what a host attaches or detaches. */
const isNic = (r: LinkRecord) => r.mac !== null && r.master === null && r.name !== 'lo';

export interface NicWaitOptions {
  signal: AbortSignal;
  /** Runs the waits in this named network namespace (`ip -n`); tests use it, the agent does not. */
  netns?: string;
  /** The `ip` binary. */
  ip?: string;
}

const ipArgs = (o: NicWaitOptions, ...args: string[]) => [...(o.netns ? ['-n', o.netns] : []), '-o', ...args];

/** Streams link records from `ip -o monitor link` (see `monitor`). */
const monitorLinks = <T>(o: NicWaitOptions, ready: () => Promise<T | undefined>, onRecord: (r: LinkRecord) => T | undefined): Promise<T> =>
  monitor(o, 'link', ready, (line) => {
    const record = parseLinkLine(line);
    return record ? onRecord(record) : undefined;
  });

/**
 * Streams the lines of `ip -o monitor <object>` to `onLine` until it returns a value (the wait's result), the signal
 * aborts, or the monitor ends. `ready` runs once the monitor is started, before any line is judged.
 */
function monitor<T>(o: NicWaitOptions, object: 'link' | 'address', ready: () => Promise<T | undefined>, onLine: (line: string) => T | undefined): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (o.signal.aborted) return reject(aborted());
    const child = spawn(o.ip ?? 'ip', ipArgs(o, 'monitor', object), { stdio: ['ignore', 'pipe', 'pipe'] });
    let settled = false;
    let stderr = '';
    const finish = (error: Error | null, value?: T) => {
      if (settled) return;
      settled = true;
      o.signal.removeEventListener('abort', onAbort);
      child.kill('SIGTERM');
      if (error) reject(error);
      else resolve(value as T);
    };
    const onAbort = () => finish(aborted());
    o.signal.addEventListener('abort', onAbort, { once: true });
    child.on('error', (error) => finish(nicError(`cannot run ip monitor: ${error.message}`)));
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-500)));
    child.on('close', (code) => finish(nicError(`ip monitor ${object} ended (exit ${code}): ${stderr.trim() || 'no output'}`)));
    const lines: string[] = [];
    let listed = false;
    const judge = (line: string) => {
      const value = onLine(line);
      if (value !== undefined) finish(null, value);
    };
    // node:readline on first use: every run's script holds this module, few runs wait for a NIC.
    process.getBuiltinModule('node:readline').createInterface({ input: child.stdout }).on('line', (line) => (listed ? judge(line) : lines.push(line)));
    // The monitor is subscribed once it runs; the links listed after that cannot miss a change.
    child.on('spawn', () => {
      ready().then(
        (value) => {
          if (value !== undefined) return finish(null, value);
          listed = true;
          for (const line of lines.splice(0)) judge(line);
        },
        (error: unknown) => finish(error as Error),
      );
    });
  });
}

/** The links present now, as `ip -o link show` lists them. */
export async function listLinks(o: NicWaitOptions): Promise<LinkRecord[]> {
  const { execFile } = await import('node:child_process');
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(o.ip ?? 'ip', ipArgs(o, 'link', 'show'), { signal: o.signal, timeout: 10_000 }, (error, out) =>
      error ? reject(o.signal.aborted ? aborted() : nicError(`ip link show failed: ${error.message}`)) : resolve(out),
    );
  });
  return stdout.split('\n').map(parseLinkLine).filter((r): r is LinkRecord => r !== null);
}

/**
 * Resolves with the name of the first NIC deleted. When no NIC is present as the wait starts, the host detached it
 * already (between the Ready and this wait): it resolves at once with ''. The kernel unlinks a port from its master
 * before it deletes it, so a port's own `Deleted` record names no master: a link once seen as a port (an SR-IOV VF
 * under its NIC, which the host may remove and add back at any time) is never taken for the NIC going.
 */
export function waitForNicDetach(o: NicWaitOptions): Promise<string> {
  const ports = new Set<number>();
  const seen = (r: LinkRecord) => {
    if (r.master !== null) ports.add(r.index);
  };
  return monitorLinks(
    o,
    async () => {
      const links = await listLinks(o);
      links.forEach(seen);
      return links.some(isNic) ? undefined : '';
    },
    (r) => {
      seen(r);
      return r.deleted && isNic(r) && !ports.has(r.index) ? r.name : undefined;
    },
  );
}

/** Resolves with a NIC present and not among `tried` (by name): one there already, or the next one attached. */
export function waitForNicAttach(o: NicWaitOptions & { tried: readonly string[] }): Promise<{ name: string; mac: string }> {
  const fresh = (r: LinkRecord) => (!r.deleted && isNic(r) && !o.tried.includes(r.name) ? { name: r.name, mac: r.mac! } : undefined);
  return monitorLinks(
    o,
    async () => (await listLinks(o)).map(fresh).find((nic) => nic !== undefined),
    fresh,
  );
}

/**
 * Resolves with the name of the first NIC whose carrier goes down and then comes up again while it watches (the
 * host moving it to another network, as at a pool VM's claim).
 */
export function waitForCarrierSwitch(o: NicWaitOptions): Promise<string> {
  const lost = new Set<string>();
  return monitorLinks(
    o,
    async () => undefined,
    (r) => {
      if (!isNic(r) || r.deleted) return undefined;
      const carrier = r.flags.includes('LOWER_UP');
      if (!carrier) lost.add(r.name);
      return carrier && lost.has(r.name) ? r.name : undefined;
    },
  );
}

/** The first IPv4 address (not link-local) of `nic` in an `ip -o addr` / `ip -o monitor address` line, or null. */
export function ipv4In(line: string, nic: string): string | null {
  const m = /^(Deleted )?\d+: (\S+)\s+inet (\d+\.\d+\.\d+\.\d+)\//.exec(line.trim());
  if (!m || m[1] || m[2] !== nic || m[3]!.startsWith('169.254.')) return null;
  return m[3]!;
}

/** Resolves with an IPv4 address of `nic`: one it has already, or the first one it gets (a lease). */
export function waitForAddress(o: NicWaitOptions & { nic: string }): Promise<string> {
  const present = async () => {
    const { execFile } = await import('node:child_process');
    const out = await new Promise<string>((resolve) => {
      execFile(o.ip ?? 'ip', ipArgs(o, '-4', 'addr', 'show', 'dev', o.nic), { signal: o.signal, timeout: 10_000 }, (error, stdout) => resolve(error ? '' : stdout));
    });
    return out.split('\n').map((l) => ipv4In(l, o.nic)).find((a) => a !== null) ?? undefined;
  };
  return monitor(o, 'address', present, (line) => ipv4In(line, o.nic) ?? undefined);
}

const aborted = () => new BootstateError('PPS_NIC_FAILED', 'the wait for a network interface was aborted', { data: [['error', 'aborted']] });
const nicError = (message: string) => new BootstateError('PPS_NIC_FAILED', message, { data: [['error', message]] });
