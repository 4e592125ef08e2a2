/**
 * Which block device is the VM's temporary ("resource") disk, told from sysfs alone (docs/resource-disk.md):
 * - Gen1: a `Msft Virtual Disk` whose VMBus channel's device id starts `00000000-0001-` (the second IDE port).
 * - Gen2: LUN 1 of SCSI controller 0, the VMBus channel with device id `f8b3781a-1e82-4818-a1c3-63d806ec15bb`
 *   (LUN 0 is the OS disk; data disks are on controllers 1–3, ids `f8b3781b…` to `f8b3781d…`).
 * - NVMe: a namespace of a controller whose model is `Microsoft NVMe Direct Disk` or `… v2` (local storage, one
 *   controller per disk). Remote NVMe (OS and data disks) is `MSFT NVMe Accelerator v1.0` and is never chosen.
 * The SCSI resource disk is the temporary disk; local NVMe disks are listed apart, for local-nvme.ts, and none of them is
 * ever taken for the temporary disk on its own. Everything is read under `sysRoot`, so tests can build the tree.
 */
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

export const GEN1_RESOURCE_PREFIX = '00000000-0001-';
export const GEN2_SCSI0_DEVICE_ID = 'f8b3781a-1e82-4818-a1c3-63d806ec15bb';
export const NVME_LOCAL_MODELS = ['Microsoft NVMe Direct Disk', 'Microsoft NVMe Direct Disk v2'] as const;

export interface FoundDisk {
  /** Kernel name, e.g. `sdb`, `nvme1n1`; the device node is `/dev/<name>`. */
  name: string;
  /** How it was recognised. */
  kind: 'gen1' | 'gen2';
  /** One sentence for the log: what identified it. */
  why: string;
}

export interface FindResult {
  /** The SCSI resource disk; null when the VM has none. */
  disk: FoundDisk | null;
  /** Kernel names of the local NVMe disks, in kernel order (`nvme2n1` before `nvme10n1`). */
  localNvme: string[];
}

function readAttr(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/** `dir` and the directories above it. */
function ancestors(dir: string): string[] {
  const out: string[] = [];
  for (let d = dir; d !== path.dirname(d); d = path.dirname(d)) out.push(d);
  return out;
}

const SCSI_ADDRESS = /^\d+:\d+:\d+:(\d+)$/;

function classify(sysRoot: string, name: string): FoundDisk | 'nvme-local' | null {
  let dir: string;
  try {
    dir = realpathSync(path.join(sysRoot, 'class/block', name));
  } catch {
    return null;
  }
  if (readAttr(path.join(dir, 'partition')) !== null) return null;
  const up = ancestors(dir);
  if (/^nvme\d+n\d+$/.test(name)) {
    const model = readAttr(path.join(path.dirname(dir), 'model')) ?? readAttr(path.join(dir, 'device/model'));
    return model !== null && (NVME_LOCAL_MODELS as readonly string[]).includes(model) ? 'nvme-local' : null;
  }
  const scsi = up.find((d) => SCSI_ADDRESS.test(path.basename(d)));
  const channel = up.find((d) => readAttr(path.join(d, 'device_id')) !== null);
  if (!scsi || !channel) return null;
  if (readAttr(path.join(scsi, 'vendor')) !== 'Msft' || readAttr(path.join(scsi, 'model')) !== 'Virtual Disk') return null;
  const id = readAttr(path.join(channel, 'device_id'))!.replace(/^\{|\}$/g, '').toLowerCase();
  const lun = Number(SCSI_ADDRESS.exec(path.basename(scsi))![1]);
  if (id.startsWith(GEN1_RESOURCE_PREFIX)) return { name, kind: 'gen1', why: `VMBus device id {${id}}: the resource disk of a Generation 1 VM` };
  if (id === GEN2_SCSI0_DEVICE_ID && lun === 1) return { name, kind: 'gen2', why: 'LUN 1 of SCSI controller 0: the resource disk of a Generation 2 VM' };
  return null;
}

/** Finds the temporary disk and the local NVMe disks under `sysRoot` (default `/sys`). */
export function findResourceDisk(sysRoot = '/sys'): FindResult {
  let names: string[];
  try {
    names = readdirSync(path.join(sysRoot, 'class/block')).sort(byKernelOrder);
  } catch {
    return { disk: null, localNvme: [] };
  }
  const localNvme: string[] = [];
  let scsi: FoundDisk | null = null;
  for (const name of names) {
    const found = classify(sysRoot, name);
    if (found === 'nvme-local') localNvme.push(name);
    else if (found) scsi ??= found;
  }
  return { disk: scsi, localNvme };
}

/** `nvme2n1` before `nvme10n1`, `sdb` before `sdaa`. */
function byKernelOrder(a: string, b: string): number {
  return a.length - b.length || a.localeCompare(b, 'en', { numeric: true });
}
