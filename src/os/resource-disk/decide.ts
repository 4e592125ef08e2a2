/**
 * Whether the temporary disk may be formatted: the pure rule, from what was read off the disk (probe.ts). Only what
 * is safe to lose is ever formatted: a blank disk, Azure's pristine NTFS (at most two partitions, the last one NTFS
 * whose root holds nothing but `DATALOSS_WARNING_README.txt` and `System Volume Information`, the first of two without
 * a filesystem: the Microsoft reserved partition of disks over 2 TB), or our own partition that never got its
 * filesystem. A disk that is already ours is only mounted; anything else is left alone with the reason.
 */

export interface PartitionProbe {
  number: number;
  node: string;
  /** blkid's TYPE, e.g. `ntfs`, `ext4`; null when no filesystem signature was found. */
  fsType: string | null;
  label: string | null;
  /** The GPT partition name; null on an MBR disk or when unnamed. */
  gptName: string | null;
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

/** The root of the candidate NTFS partition: the names in it, or why it could not be read. */
export type NtfsListing = { names: string[] } | { error: string };

export type Decision =
  | { action: 'format'; why: string }
  | { action: 'make-filesystem'; partition: string; why: string }
  | { action: 'mount'; partition: string; why: string }
  | { action: 'leave'; why: string };

/** Names Azure's fresh NTFS may hold in its root (compared case-insensitively), besides NTFS's own `$` files. */
export const PRISTINE_NTFS_NAMES = ['dataloss_warning_readme.txt', 'system volume information'];

/** NTFS's metadata files, which `ntfsls -a -s` lists in every root directory. */
export const NTFS_METAFILES = ['$AttrDef', '$BadClus', '$Bitmap', '$Boot', '$Extend', '$LogFile', '$MFT', '$MFTMirr', '$Secure', '$UpCase', '$Volume'];

/** The partition whose NTFS root must be listed before deciding, or null when the decision needs no listing. */
export function ntfsCandidate(probe: DiskProbe, label: string): PartitionProbe | null {
  if (probe.inUse || probe.mounts.length > 0 || probe.table === null || ours(probe, label) || probe.partitions.length === 0 || probe.partitions.length > 2) return null;
  const last = probe.partitions.at(-1)!;
  return last.fsType === 'ntfs' ? last : null;
}

/** The names in an NTFS root that are not Azure's: what a pristine temporary disk must not have. */
export function unexpectedNames(names: string[]): string[] {
  return names.filter((n) => n !== '.' && n !== '..' && !NTFS_METAFILES.includes(n) && !PRISTINE_NTFS_NAMES.includes(n.toLowerCase()));
}

function ours(probe: DiskProbe, label: string): Decision | null {
  const [only] = probe.partitions;
  if (probe.partitions.length !== 1 || !only) return null;
  if (only.fsType === 'ext4' && only.label === label) return { action: 'mount', partition: only.node, why: `partition ${only.number} holds ext4 labelled ${label}, made by bootstate` };
  if (probe.table === 'gpt' && only.gptName === label && only.fsType === null) {
    return { action: 'make-filesystem', partition: only.node, why: `partition ${only.number} is bootstate's (GPT name ${label}) and has no filesystem yet` };
  }
  return null;
}

/**
 * Decides what to do with the disk. `listing` is the root of `ntfsCandidate(probe, label)`, when there is one.
 *
 * @example
 *   decide({ device: '/dev/sdb', table: null, wholeDiskFs: null, partitions: [], mounts: [], inUse: null }, target, null)
 *   // { action: 'format', why: 'it holds no partition table and no filesystem' }
 */
export function decide(probe: DiskProbe, target: Target, listing: NtfsListing | null): Decision {
  const { label } = target;
  if (probe.inUse) return { action: 'leave', why: `it is in use: ${probe.inUse}` };
  const mine = ours(probe, label);
  const [mount, ...otherMounts] = probe.mounts;
  if (mount) {
    if (mine?.action === 'mount' && otherMounts.length === 0 && mount.node === mine.partition && mount.where === target.mountPoint) {
      return { ...mine, why: `${mine.why}, already mounted at ${target.mountPoint}` };
    }
    return { action: 'leave', why: `it is in use: ${mount.node} is mounted at ${mount.where}` };
  }
  if (probe.table === null) {
    return probe.wholeDiskFs === null
      ? { action: 'format', why: 'it holds no partition table and no filesystem' }
      : { action: 'leave', why: `it holds a ${probe.wholeDiskFs} filesystem on the whole disk, not Azure's NTFS` };
  }
  if (mine) return mine;
  const count = probe.partitions.length;
  if (count === 0) return { action: 'leave', why: `it holds a ${probe.table} partition table without partitions, not Azure's NTFS` };
  if (count > 2) return { action: 'leave', why: `it holds ${count} partitions; Azure's NTFS has at most two` };
  const [first, last] = count === 2 ? [probe.partitions[0]!, probe.partitions[1]!] : [null, probe.partitions[0]!];
  if (first && first.fsType !== null) return { action: 'leave', why: `partition ${first.number} holds ${first.fsType}; Azure's first of two partitions holds no filesystem` };
  if (last.fsType !== 'ntfs') return { action: 'leave', why: `partition ${last.number} holds ${last.fsType ?? 'no filesystem'}, not Azure's NTFS` };
  if (!listing) return { action: 'leave', why: `the NTFS on partition ${last.number} was not read` };
  if ('error' in listing) return { action: 'leave', why: `the NTFS on partition ${last.number} could not be read: ${listing.error}` };
  const extra = unexpectedNames(listing.names);
  if (extra.length > 0) {
    return { action: 'leave', why: `the NTFS on partition ${last.number} holds ${extra.length} ${extra.length === 1 ? 'entry' : 'entries'} besides DATALOSS_WARNING_README.txt` };
  }
  return { action: 'format', why: `partition ${last.number} holds Azure's pristine NTFS (nothing but DATALOSS_WARNING_README.txt)` };
}
