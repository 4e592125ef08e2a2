/**
 * Reads what is on the temporary disk, from the disk itself: its partition table (`sfdisk --json`), each partition's
 * filesystem (`blkid -p`, which reads the device rather than a cache), whether the kernel has any of it mounted, used
 * as swap or held by another device, whether a device without a filesystem reads as zeros (zeros.ts), and the root
 * directory of an NTFS, read through a read-only ntfs-3g mount in a mount namespace of its own.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { mkdtemp, rm, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isCommandMissing, type Runner } from '../system/exec.js';
import type { DiskProbe, NtfsListing, PartitionProbe, ZerosEvidence } from './decide.js';
import { readsAsZeros } from './zeros.js';

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

export interface SfdiskTable {
  label: string;
  /** Bytes per sector: `start` and `size` count these. */
  sectorsize?: number;
  partitions?: Array<{ node: string; start: number; size: number; type?: string; name?: string }>;
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
 * Makes sure the kernel knows the disk's partitions and their nodes lead to them: `partx --update` (loop devices and
 * disks whose re-read failed), then, where no udev made the node (a container), `mknod` from the kernel's numbers in
 * sysfs; a node left by a partition the kernel has since dropped and made again (new numbers) is made again too.
 */
export async function ensurePartitionNodes(env: ProbeEnv, device: string, nodes: string[]): Promise<void> {
  if (!nodes.every((n) => existsSync(n))) await env.run(['partx', '--update', device], { allowFailure: true, timeoutMs: TIMEOUT });
  const kernel = kernelPartitions(env.sysRoot, devNumber(device));
  for (const node of nodes) {
    const numbers = kernel.get(partitionNumber(node))?.dev;
    if (existsSync(node) && (!numbers || devNumber(node) === numbers)) continue;
    if (!numbers) throw new Error(`${node}: the kernel has no partition ${partitionNumber(node)} of ${device}`);
    if (existsSync(node)) await rm(node);
    const [major, minor] = numbers.split(':');
    await env.run(['mknod', '-m', '0660', node, 'b', major!, minor!], { timeoutMs: TIMEOUT });
  }
}

interface KernelPartition {
  /** `major:minor` */
  dev: string;
  /** Start and size in 512-byte sectors, as sysfs counts them whatever the disk's sector size. */
  start: number;
  size: number;
}

/** Partition number → what the kernel has of the disk with number `dev`: its numbers, start and size. */
function kernelPartitions(sysRoot: string, dev: string): Map<number, KernelPartition> {
  const out = new Map<number, KernelPartition>();
  let dir: string;
  try {
    dir = realpathSync(path.join(sysRoot, 'dev/block', dev));
  } catch {
    return out;
  }
  for (const entry of readdirSync(dir)) {
    const [number, numbers, start, size] = ['partition', 'dev', 'start', 'size'].map((a) => readAttr(path.join(dir, entry, a)));
    if (number && numbers && start && size) out.set(Number(number), { dev: numbers, start: Number(start), size: Number(size) });
  }
  return out;
}

/**
 * Proves the kernel uses the partitions `table` describes, at the same start and of the same size: a re-read that
 * failed (a partition held open) leaves the old ones in place, and whatever reads or writes `/dev/sdb1` would act on
 * the old extent. Throws, naming both, when it does not.
 */
export function proveKernelSees(env: Pick<ProbeEnv, 'sysRoot'>, device: string, table: SfdiskTable): void {
  const kernel = kernelPartitions(env.sysRoot, devNumber(device));
  const unit = (table.sectorsize ?? 512) / 512;
  for (const p of table.partitions ?? []) {
    const n = partitionNumber(p.node);
    const seen = kernel.get(n);
    const want = `start ${p.start * unit}, ${p.size * unit} sectors`;
    if (!seen) throw new Error(`the kernel has no partition ${n} of ${device} where the table has one (${want}): reboot to let it read the table`);
    if (existsSync(p.node) && devNumber(p.node) !== seen.dev) throw new Error(`${p.node} is device ${devNumber(p.node)}, not the kernel's partition ${n} of ${device} (${seen.dev})`);
    if (seen.start !== p.start * unit || seen.size !== p.size * unit) {
      throw new Error(`the kernel still uses an old partition ${n} of ${device} (start ${seen.start}, ${seen.size} sectors) where the table has ${want}: a re-read failed, maybe because the old partition is held open; reboot to let it read the table`);
    }
  }
  const extra = [...kernel.keys()].filter((n) => !(table.partitions ?? []).some((p) => partitionNumber(p.node) === n));
  if (extra.length > 0) throw new Error(`the kernel still has partition ${extra.join(', ')} of ${device}, which the table does not: reboot to let it read the table`);
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
  if (table) proveKernelSees(env, device, table);
  const partitions: PartitionProbe[] = [];
  for (const p of table?.partitions ?? []) {
    const tags = await blkid(env.run, p.node);
    partitions.push({
      number: partitionNumber(p.node),
      node: p.node,
      fsType: tags.TYPE ?? null,
      label: tags.LABEL ?? null,
      // From the table itself: blkid finds the name only through the disk's kernel name, which a container may lack.
      gptName: table!.label === 'gpt' ? (p.name ?? null) : null,
      typeId: (p.type ?? '').toUpperCase(),
      bytes: p.size * (table!.sectorsize ?? 512),
    });
  }
  const wholeDiskFs = table === null ? ((await blkid(env.run, device)).TYPE ?? null) : null;
  return { device, table: table?.label ?? null, wholeDiskFs, partitions, mounts: mountsOf(env, device, nodes), inUse: inUse(env, device, nodes) };
}

/** The size of a block device in bytes. */
export async function deviceBytes(run: Runner, node: string): Promise<number> {
  const result = await run(['blockdev', '--getsize64', node], { timeoutMs: TIMEOUT });
  const bytes = Number(result.stdout.trim());
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new Error(`blockdev --getsize64 ${node}: ${JSON.stringify(result.stdout.trim())}`);
  return bytes;
}

/** Whether `node` reads as zeros where a table, a filesystem or data would be (zeros.ts), or why it was not read. */
export async function readZeros(run: Runner, node: string): Promise<ZerosEvidence> {
  try {
    return await readsAsZeros(node, await deviceBytes(run, node));
  } catch (error) {
    return { error: (error as Error).message.split('\n')[0]! };
  }
}

// Mounts the NTFS read-only at $2 in the namespace unshare made, lists its root NUL-separated (a name cannot hold a
// NUL, so no name can pass for two or vanish), and unmounts it: ntfs-3g is a daemon that would otherwise keep the
// namespace, and the device, open.
const LIST_NTFS_ROOT = `ntfs-3g -o ro "$1" "$2" || exit 90
find "$2" -mindepth 1 -maxdepth 1 -printf '%f\\0'
status=$?
umount "$2" || exit 91
exit $status`;

/**
 * The root directory of the NTFS on `node`: every entry's exact name, or why it could not be read. ntfs-3g lists what
 * Windows shows, NTFS's own `$` files excepted (by their record numbers, so a user's `$notes` is listed); the DOS 8.3
 * aliases are not entries of their own.
 */
export async function listNtfsRoot(run: Runner, node: string): Promise<NtfsListing> {
  const where = await mkdtemp(path.join(tmpdir(), 'bootstate-ntfs-'));
  try {
    const result = await run(['unshare', '--mount', '--propagation', 'private', 'sh', '-c', LIST_NTFS_ROOT, 'list-ntfs-root', node, where], {
      allowFailure: true,
      timeoutMs: TIMEOUT,
      maxOutputBytes: 16 * 1024 * 1024,
    });
    if (result.exitCode !== 0) {
      const what = result.exitCode === 90 ? 'ntfs-3g could not mount it read-only' : result.exitCode === 91 ? 'it could not be unmounted' : `listing its root failed (exit ${result.exitCode})`;
      return { error: `${what}: ${result.stderr.trim().split('\n')[0] ?? ''}` };
    }
    return { names: result.stdout.split('\0').slice(0, -1) };
  } catch (error) {
    return { error: isCommandMissing(error) ? 'unshare (util-linux) is not installed' : (error as Error).message };
  } finally {
    await rmdir(where).catch(() => undefined);
  }
}
