/**
 * Reads what is on the temporary disk, from the disk itself: its partition table (`sfdisk --json`), each partition's
 * filesystem (`blkid -p`, which reads the device rather than a cache), whether the kernel has any of it mounted, used
 * as swap or held by another device, and the root directory of an NTFS (`ntfsls` from ntfs-3g, which reads the
 * volume without mounting it).
 */
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { isCommandMissing, type Runner } from '../exec.js';
import type { DiskProbe, NtfsListing, PartitionProbe } from './decide.js';

export interface ProbeEnv {
  run: Runner;
  /** sysfs, for partitions the kernel knows and devices holding the disk. */
  sysRoot: string;
  /** The mount table read for "in use" (default /proc/self/mountinfo). */
  mountinfo: string;
  /** The active swap areas (default /proc/swaps). */
  swaps: string;
}

const SECONDS = 1000;
const TIMEOUT = 120 * SECONDS;

/** `KEY=value` lines of `blkid -o export`, with its backslash escapes undone. */
export function parseExport(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) out[line.slice(0, eq)] = line.slice(eq + 1).replace(/\\(.)/g, '$1');
  }
  return out;
}

/** blkid's low-level probe of `node`: its tags, or none when it holds no known signature (exit 2). */
export async function blkid(run: Runner, node: string): Promise<Record<string, string>> {
  const result = await run(['blkid', '-p', '-o', 'export', node], { allowFailure: true, timeoutMs: TIMEOUT });
  if (result.exitCode === 2) return {};
  if (result.exitCode !== 0) throw new Error(`blkid -p ${node}: ${result.stderr.trim() || `exit ${result.exitCode}`}`);
  return parseExport(result.stdout);
}

interface SfdiskTable {
  label: string;
  partitions?: Array<{ node: string; start: number; size: number }>;
}

/** The partition table on `device`, or null when there is none. */
export async function readTable(run: Runner, device: string): Promise<SfdiskTable | null> {
  const result = await run(['sfdisk', '--json', device], { allowFailure: true, timeoutMs: TIMEOUT });
  if (result.exitCode !== 0) {
    if (/does not contain a recognized partition table/.test(result.stderr)) return null;
    throw new Error(`sfdisk --json ${device}: ${result.stderr.trim() || `exit ${result.exitCode}`}`);
  }
  return (JSON.parse(result.stdout) as { partitiontable: SfdiskTable }).partitiontable;
}

/** `major:minor` of a block device node. */
export function devNumber(node: string): string {
  const { rdev } = statSync(node);
  return `${Math.floor(rdev / 256) & 0xfff}:${(rdev & 0xff) | ((rdev >> 12) & 0xfff00)}`;
}

/** The partition's number from its node name: `/dev/sdb2` → 2, `/dev/nvme0n1p1` → 1. */
export function partitionNumber(node: string): number {
  return Number(/(\d+)$/.exec(node)?.[1] ?? NaN);
}

/**
 * Makes sure the kernel knows the disk's partitions and their nodes exist: `partx --update` (loop devices and disks
 * whose re-read failed), then, where no udev made the node (a container), `mknod` from the kernel's numbers in sysfs.
 */
export async function ensurePartitionNodes(env: ProbeEnv, device: string, nodes: string[]): Promise<void> {
  if (nodes.every((n) => existsSync(n))) return;
  await env.run(['partx', '--update', device], { allowFailure: true, timeoutMs: TIMEOUT });
  for (const node of nodes) {
    if (existsSync(node)) continue;
    const kernel = kernelPartitions(env.sysRoot, devNumber(device)).get(partitionNumber(node));
    if (!kernel) throw new Error(`${node}: the kernel has no partition ${partitionNumber(node)} of ${device}`);
    const [major, minor] = kernel.split(':');
    await env.run(['mknod', '-m', '0660', node, 'b', major!, minor!], { timeoutMs: TIMEOUT });
  }
}

/** Partition number → `major:minor` of the partitions the kernel has of the disk with number `dev`. */
function kernelPartitions(sysRoot: string, dev: string): Map<number, string> {
  const out = new Map<number, string>();
  let dir: string;
  try {
    dir = realpathSync(path.join(sysRoot, 'dev/block', dev));
  } catch {
    return out;
  }
  for (const entry of readdirSync(dir)) {
    const number = readAttr(path.join(dir, entry, 'partition'));
    const numbers = readAttr(path.join(dir, entry, 'dev'));
    if (number !== null && numbers !== null) out.set(Number(number), numbers);
  }
  return out;
}

function readAttr(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/** Node → number of `device` and those of `nodes` that exist. */
function numbersOf(device: string, nodes: string[]): Map<string, string> {
  const numbers = new Map<string, string>();
  for (const n of [device, ...nodes]) if (existsSync(n)) numbers.set(devNumber(n), n);
  return numbers;
}

/** Where `device` or one of `nodes` is mounted, from the mount table. */
export function mountsOf(env: Pick<ProbeEnv, 'mountinfo'>, device: string, nodes: string[]): Array<{ node: string; where: string }> {
  const numbers = numbersOf(device, nodes);
  const out: Array<{ node: string; where: string }> = [];
  for (const line of readAttr(env.mountinfo)?.split('\n') ?? []) {
    const fields = line.split(' ');
    const node = numbers.get(fields[2] ?? '');
    if (node) out.push({ node, where: unescapeMount(fields[4] ?? '?') });
  }
  return out;
}

/** `major:minor` of what is mounted at `where`, topmost last; none when nothing is. */
export function mountedAt(env: Pick<ProbeEnv, 'mountinfo'>, where: string): string[] {
  return (readAttr(env.mountinfo)?.split('\n') ?? [])
    .map((line) => line.split(' '))
    .filter((fields) => fields.length > 4 && unescapeMount(fields[4]!) === where)
    .map((fields) => fields[2]!);
}

/** Why `device` or one of `nodes` is in use other than mounted (active swap, held by device-mapper or md), or null. */
export function inUse(env: ProbeEnv, device: string, nodes: string[]): string | null {
  const numbers = numbersOf(device, nodes);
  for (const line of (readAttr(env.swaps)?.split('\n') ?? []).slice(1)) {
    const file = line.split(/\s+/)[0];
    if (!file || !existsSync(file)) continue;
    try {
      const node = numbers.get(devNumber(file));
      if (node) return `${node} is active swap`;
    } catch {
      // a swap file, not a device
    }
  }
  for (const [dev, node] of numbers) {
    let holders: string[] = [];
    try {
      holders = readdirSync(path.join(env.sysRoot, 'dev/block', dev, 'holders'));
    } catch {
      // no holders directory: nothing holds it
    }
    if (holders.length > 0) return `${node} is held by ${holders.join(', ')}`;
  }
  return null;
}

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Reads the disk: table, partitions with their filesystems, and whether it is in use. */
export async function probeDisk(env: ProbeEnv, device: string): Promise<DiskProbe> {
  const table = await readTable(env.run, device);
  const nodes = (table?.partitions ?? []).map((p) => p.node);
  if (nodes.length > 0) await ensurePartitionNodes(env, device, nodes);
  const partitions: PartitionProbe[] = [];
  for (const node of nodes) {
    const tags = await blkid(env.run, node);
    partitions.push({ number: partitionNumber(node), node, fsType: tags.TYPE ?? null, label: tags.LABEL ?? null, gptName: tags.PART_ENTRY_NAME ?? null });
  }
  const wholeDiskFs = table === null ? ((await blkid(env.run, device)).TYPE ?? null) : null;
  return { device, table: table?.label ?? null, wholeDiskFs, partitions, mounts: mountsOf(env, device, nodes), inUse: inUse(env, device, nodes) };
}

/**
 * The root directory of the NTFS on `node`, or why it could not be read. `-a -s` lists every name but the DOS 8.3
 * aliases: without `-a` names in the POSIX namespace are hidden, without `-s` those starting with `$` (a user's
 * `$notes` as much as NTFS's `$MFT`), and `-s` alone lists nothing else.
 */
export async function listNtfsRoot(run: Runner, node: string): Promise<NtfsListing> {
  let result;
  try {
    result = await run(['ntfsls', '-a', '-s', node], { allowFailure: true, timeoutMs: TIMEOUT });
  } catch (error) {
    return { error: isCommandMissing(error) ? 'ntfsls (ntfs-3g) is not installed' : (error as Error).message };
  }
  if (result.exitCode !== 0) return { error: `ntfsls: ${result.stderr.trim().split('\n')[0] || `exit ${result.exitCode}`}` };
  return { names: result.stdout.split('\n').filter((n) => n.length > 0) };
}
