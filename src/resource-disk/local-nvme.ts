/**
 * The VM's local NVMe disks (find.ts lists them), each with the index it goes by. azure-vm-utils' udev rule names
 * them `/dev/disk/azure/local/by-index/<N>` from the disk's own Identify Namespace data (N from 1; on a v6 size
 * `nvme3n1` may well be index 1): when every disk has such a name they are ordered and shown by it, so an index
 * always means the same disk. Without those names (no azure-vm-utils, or older sizes whose disks carry no index) they
 * are numbered 1, 2, … in kernel order, which the kernel does not promise to keep from one boot to the next.
 */
import { readdirSync, realpathSync } from 'node:fs';
import path from 'node:path';

/** Where azure-vm-utils' rule links the local NVMe disks by index, under the device directory. */
export const BY_INDEX_DIR = 'disk/azure/local/by-index';

export interface LocalDisk {
  /** Kernel name, e.g. `nvme3n1`. */
  name: string;
  /** The device node, `<devDir>/<name>`: what commands are given. */
  device: string;
  /** 1, 2, …: azure-vm-utils' index, or the place in kernel order. */
  index: number;
  /** What the log calls it: `/dev/disk/azure/local/by-index/1 (/dev/nvme3n1)`, or the device alone. */
  shown: string;
}

export interface LocalDisks {
  disks: LocalDisk[];
  /** How the indexes were given. */
  orderedBy: 'azure-vm-utils index' | 'kernel order';
}

/** Kernel name → index, from the by-index links that lead to the node of a disk of `names`. */
function byIndex(devDir: string, names: string[]): Map<string, number> {
  const out = new Map<string, number>();
  const dir = path.join(devDir, BY_INDEX_DIR);
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  const nodes = new Map<string, string>();
  for (const name of names) {
    try {
      nodes.set(realpathSync(path.join(devDir, name)), name);
    } catch {
      // no node: nothing can lead to it
    }
  }
  for (const entry of entries.filter((e) => /^[1-9]\d*$/.test(e))) {
    try {
      const name = nodes.get(realpathSync(path.join(dir, entry)));
      if (name !== undefined && !out.has(name)) out.set(name, Number(entry));
    } catch {
      // a dangling link: the disk it named is gone
    }
  }
  return out;
}

/**
 * The local NVMe disks `names` (kernel order), indexed by azure-vm-utils when every one has its own index.
 *
 * @example
 *   localDisks(['nvme1n1', 'nvme2n1'], '/dev')
 *   // by-index/1 → nvme2n1, by-index/2 → nvme1n1: [{ name: 'nvme2n1', index: 1, … }, { name: 'nvme1n1', index: 2, … }]
 */
export function localDisks(names: string[], devDir: string): LocalDisks {
  const indexes = byIndex(devDir, names);
  const distinct = new Set(indexes.values()).size === names.length;
  if (names.length > 0 && indexes.size === names.length && distinct) {
    const disks = names.map((name) => {
      const index = indexes.get(name)!;
      const device = path.join(devDir, name);
      return { name, device, index, shown: `${path.join(devDir, BY_INDEX_DIR, String(index))} (${device})` };
    });
    return { disks: disks.sort((a, b) => a.index - b.index), orderedBy: 'azure-vm-utils index' };
  }
  const disks = names.map((name, i) => ({ name, device: path.join(devDir, name), index: i + 1, shown: path.join(devDir, name) }));
  return { disks, orderedBy: 'kernel order' };
}
