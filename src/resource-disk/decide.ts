/**
 * Whether the temporary disk may be formatted: the pure rule, from what was read off the disk (probe.ts). Only what
 * is provably safe to lose is ever formatted: a disk that reads as zeros where a table, a filesystem or data would
 * be, Azure's pristine NTFS (at most two partitions: the last one NTFS in a basic data partition whose root holds
 * nothing but `DATALOSS_WARNING_README.txt` and `System Volume Information`, the first of two a Microsoft reserved
 * partition), or bootstate's own partition that never got its filesystem and reads as zeros. A disk that is already
 * ours is only mounted; anything else is left alone with the reason. Each outcome names its row of the decision table
 * in docs/resource-disk.md.
 */
import type { ZerosProof } from './zeros.js';

export interface PartitionProbe {
  number: number;
  node: string;
  /** blkid's TYPE, e.g. `ntfs`, `ext4`; null when no filesystem signature was found. */
  fsType: string | null;
  label: string | null;
  /** The GPT partition name; null on an MBR disk or when unnamed. */
  gptName: string | null;
  /** The partition type from the table: a GPT type GUID in capitals, or an MBR type in hex (`7`). */
  typeId: string;
  /** The partition's size in bytes, from the table. */
  bytes: number;
}

export interface DiskProbe {
  device: string;
  /** `gpt`, `dos`; null when the disk has no partition table. */
  table: string | null;
  /** A filesystem on the whole disk (no partition table), by blkid's TYPE. */
  wholeDiskFs: string | null;
  partitions: PartitionProbe[];
  /** Where the disk or its partitions are mounted. */
  mounts: Array<{ node: string; where: string }>;
  /** Why the disk is otherwise in use (active swap, held by another device); null when it is not. */
  inUse: string | null;
}

/** What the disk should become: bootstate's ext4, by this label, mounted here. */
export interface Target {
  label: string;
  mountPoint: string;
}

/** The root of the candidate NTFS partition: every entry's exact name, or why it could not be read. */
export type NtfsListing = { names: string[] } | { error: string };

/** Whether the candidate device reads as zeros (zeros.ts), or why it could not be read. */
export type ZerosEvidence = ZerosProof | { error: string };

/** The rows of the decision table (docs/resource-disk.md), one per way a disk is judged. */
export type Row =
  | 'in-use' | 'mounted-elsewhere' | 'ours-mounted' | 'ours' | 'ours-blank' | 'ours-damaged' | 'ours-unread'
  | 'raw-zeros' | 'raw-data' | 'raw-unread' | 'whole-disk-fs' | 'no-partitions' | 'too-many-partitions'
  | 'first-not-msr' | 'not-ntfs' | 'ntfs-wrong-type' | 'ntfs-unread' | 'ntfs-user-files' | 'ntfs-pristine';

export type Decision =
  | { action: 'format'; row: Row; why: string }
  | { action: 'make-filesystem'; row: Row; partition: string; why: string }
  | { action: 'mount'; row: Row; partition: string; why: string }
  | { action: 'leave'; row: Row; why: string };

/** Names Azure's fresh NTFS may hold in its root, each at most once (compared case-insensitively, as NTFS does). */
export const PRISTINE_NTFS_NAMES = ['dataloss_warning_readme.txt', 'system volume information'];

/** The Microsoft reserved partition's GPT type, and its sizes: 16 MiB since Windows 10, 128 MiB before. */
export const MSR_TYPE = 'E3C9E316-0B5C-4DB8-817D-F92DF00215AE';
export const MSR_SIZES = [16 * 1024 * 1024, 128 * 1024 * 1024];
/** The types an NTFS partition has: MBR 0x07, GPT's basic data partition. */
export const NTFS_PARTITION_TYPES = ['7', 'EBD0A0A2-B9E5-4433-87C0-68B6B72699C7'];

const leave = (row: Row, why: string): Decision => ({ action: 'leave', row, why });

/** The partition whose NTFS root must be listed before deciding, or null when the decision needs no listing. */
export function ntfsCandidate(probe: DiskProbe, label: string): PartitionProbe | null {
  if (probe.inUse || probe.mounts.length > 0 || probe.table === null || ownPartition(probe, label) || probe.partitions.length === 0 || probe.partitions.length > 2) return null;
  const last = probe.partitions.at(-1)!;
  return last.fsType === 'ntfs' ? last : null;
}

/** The device that must prove it reads as zeros before deciding (the whole disk, or our partition), or null. */
export function zerosCandidate(probe: DiskProbe, label: string): string | null {
  if (probe.inUse || probe.mounts.length > 0) return null;
  if (probe.table === null) return probe.wholeDiskFs === null ? probe.device : null;
  const own = ownPartition(probe, label);
  return own && own.fsType === null ? own.node : null;
}

/** The names in an NTFS root that are not Azure's: what a pristine temporary disk must not have. */
export function unexpectedNames(names: string[]): string[] {
  const seen = new Set<string>();
  return names.filter((name) => {
    const folded = name.toLowerCase();
    if (!PRISTINE_NTFS_NAMES.includes(folded) || seen.has(folded)) return true;
    seen.add(folded);
    return false;
  });
}

/** bootstate's own partition: the one partition of a GPT, named by the label. */
function ownPartition(probe: DiskProbe, label: string): PartitionProbe | null {
  const [only] = probe.partitions;
  if (probe.partitions.length !== 1 || !only) return null;
  if (only.fsType === 'ext4' && only.label === label) return only;
  return probe.table === 'gpt' && only.gptName === label && only.fsType === null ? only : null;
}

const MiB = 1024 * 1024;

function ours(probe: DiskProbe, label: string, zeros: ZerosEvidence | null): Decision | null {
  const own = ownPartition(probe, label);
  if (!own) return null;
  const { number: n, node } = own;
  if (own.fsType === 'ext4') return { action: 'mount', row: 'ours', partition: node, why: `partition ${n} holds ext4 labelled ${label}, made by bootstate` };
  const named = `partition ${n} (${node}) is bootstate's (GPT name ${label}) but holds no filesystem blkid recognises`;
  if (!zeros) return leave('ours-unread', `${named}, and it was not read`);
  if ('error' in zeros) return leave('ours-unread', `${named}, and it could not be read: ${zeros.error}`);
  if (!zeros.zeros) {
    return leave('ours-damaged', `${named}, and data (byte ${zeros.offset} is not zero): a damaged filesystem is never made again; if it was bootstate's ext4, e2fsck -b 32768 ${node} (-b 8193 for 1 KiB blocks) may recover it`);
  }
  return { action: 'make-filesystem', row: 'ours-blank', partition: node, why: `partition ${n} is bootstate's (GPT name ${label}), has no filesystem yet and reads as zeros` };
}

function raw(probe: DiskProbe, zeros: ZerosEvidence | null): Decision {
  if (probe.wholeDiskFs !== null) return leave('whole-disk-fs', `it holds a ${probe.wholeDiskFs} filesystem on the whole disk, not Azure's NTFS`);
  const none = 'it holds no partition table and no filesystem';
  if (!zeros) return leave('raw-unread', `${none}, and it was not read`);
  if ('error' in zeros) return leave('raw-unread', `${none}, and it could not be read: ${zeros.error}`);
  if (!zeros.zeros) return leave('raw-data', `${none}, but data (byte ${zeros.offset} is not zero): a disk used raw is never formatted`);
  return { action: 'format', row: 'raw-zeros', why: `${none}, and reads as zeros where they or data would be` };
}

/** Why the first of two partitions is not a Microsoft reserved partition, or null when it is one. */
function notMsr(probe: DiskProbe, first: PartitionProbe): string | null {
  if (probe.table !== 'gpt' || first.typeId !== MSR_TYPE) return `partition ${first.number} is not a Microsoft reserved partition (type ${first.typeId})`;
  if (!MSR_SIZES.includes(first.bytes)) return `partition ${first.number} is ${first.bytes / MiB} MiB, not the 16 or 128 MiB of a Microsoft reserved partition`;
  if (first.fsType !== null) return `partition ${first.number} holds ${first.fsType}; a Microsoft reserved partition holds no filesystem`;
  return null;
}

function ntfs(probe: DiskProbe, listing: NtfsListing | null): Decision {
  const count = probe.partitions.length;
  if (count === 0) return leave('no-partitions', `it holds a ${probe.table} partition table without partitions, not Azure's NTFS`);
  if (count > 2) return leave('too-many-partitions', `it holds ${count} partitions; Azure's NTFS has at most two`);
  const last = probe.partitions.at(-1)!;
  const msr = count === 2 ? notMsr(probe, probe.partitions[0]!) : null;
  if (msr) return leave('first-not-msr', `${msr}; Azure's first of two partitions is one`);
  if (last.fsType !== 'ntfs') return leave('not-ntfs', `partition ${last.number} holds ${last.fsType ?? 'no filesystem'}, not Azure's NTFS`);
  if (!NTFS_PARTITION_TYPES.includes(last.typeId)) return leave('ntfs-wrong-type', `the NTFS on partition ${last.number} is in a partition of type ${last.typeId}, not a basic data partition`);
  if (!listing) return leave('ntfs-unread', `the NTFS on partition ${last.number} was not read`);
  if ('error' in listing) return leave('ntfs-unread', `the NTFS on partition ${last.number} could not be read: ${listing.error}`);
  const extra = unexpectedNames(listing.names);
  if (extra.length > 0) {
    return leave('ntfs-user-files', `the NTFS on partition ${last.number} holds ${extra.length} ${extra.length === 1 ? 'entry' : 'entries'} besides DATALOSS_WARNING_README.txt`);
  }
  return { action: 'format', row: 'ntfs-pristine', why: `partition ${last.number} holds Azure's pristine NTFS (nothing but DATALOSS_WARNING_README.txt)` };
}

/**
 * Decides what to do with the disk. `listing` is the root of `ntfsCandidate(probe, label)` and `zeros` what reading
 * `zerosCandidate(probe, label)` showed, when there is one.
 *
 * @example
 *   decide({ device: '/dev/sdb', table: null, wholeDiskFs: null, partitions: [], mounts: [], inUse: null }, target, null, { zeros: true, bytesRead: 12582912 })
 *   // { action: 'format', row: 'raw-zeros', why: 'it holds no partition table and no filesystem, and reads as zeros …' }
 */
export function decide(probe: DiskProbe, target: Target, listing: NtfsListing | null, zeros: ZerosEvidence | null = null): Decision {
  const { label } = target;
  if (probe.inUse) return leave('in-use', `it is in use: ${probe.inUse}`);
  const [mount, ...otherMounts] = probe.mounts;
  if (mount) {
    const own = ownPartition(probe, label);
    if (own?.fsType === 'ext4' && otherMounts.length === 0 && mount.node === own.node && mount.where === target.mountPoint) {
      return { action: 'mount', row: 'ours-mounted', partition: own.node, why: `partition ${own.number} holds ext4 labelled ${label}, made by bootstate, already mounted at ${target.mountPoint}` };
    }
    return leave('mounted-elsewhere', `it is in use: ${mount.node} is mounted at ${mount.where}`);
  }
  if (probe.table === null) return raw(probe, zeros);
  return ours(probe, label, zeros) ?? ntfs(probe, listing);
}
