/**
 * Which block devices hold a UDF or ISO 9660 file system, read in-process from their volume descriptors instead
 * of forking blkid twice, on a first boot's critical path. Both formats start their descriptors at byte 32768 in
 * 2048-byte sectors, each with a 5-byte standard identifier at offset 1: `CD001` (ISO 9660), and UDF's volume
 * recognition sequence `BEA01`, `NSR02` or `NSR03`, `TEA01` (ECMA-167). A disc with both (a UDF bridge) counts as
 * UDF, as blkid reports it. Devices come from /sys/class/block; empty ones (a drive with no disc, an unused loop
 * device) are skipped without opening them.
 */
import { constants } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { under } from '../system/paths.js';

export type MediaFileSystem = 'udf' | 'iso9660';

const SECTOR = 2048;
const FIRST_DESCRIPTOR = 16 * SECTOR;
/** The recognition sequence is short: CD001 descriptors (a bridge disc), BEA01, NSR0x, TEA01. */
const SECTORS_READ = 16;

/** The file system whose volume descriptors `header` (bytes from offset 32768) carries, or null. */
export function fileSystemOf(header: Buffer): MediaFileSystem | null {
  let iso = false;
  for (let at = 0; at + 6 <= header.length; at += SECTOR) {
    const id = header.toString('latin1', at + 1, at + 6);
    if (id === 'NSR02' || id === 'NSR03') return 'udf';
    if (id === 'CD001' && at === 0) iso = true;
    else if (id !== 'CD001' && id !== 'BEA01' && id !== 'TEA01' && id !== 'BOOT2') break;
  }
  return iso ? 'iso9660' : null;
}

/** Reads the descriptor area of one device; null when it cannot be opened or read (no disc, no permission). */
async function probeDevice(device: string): Promise<MediaFileSystem | null> {
  let handle;
  try {
    handle = await open(device, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch {
    return null;
  }
  try {
    const header = Buffer.alloc(SECTORS_READ * SECTOR);
    const { bytesRead } = await handle.read(header, 0, header.length, FIRST_DESCRIPTOR);
    return fileSystemOf(header.subarray(0, bytesRead));
  } catch {
    return null;
  } finally {
    await handle.close();
  }
}

/**
 * The devices (`/dev/<name>`) with a UDF file system, then those with ISO 9660, each in /sys/class/block order;
 * null when /sys/class/block cannot be listed, so the caller can ask blkid instead.
 */
export async function probeMediaDevices(root = '/'): Promise<{ udf: string[]; iso9660: string[] } | null> {
  const sys = under(root, '/sys/class/block');
  let names: string[];
  try {
    names = (await readdir(sys)).sort();
  } catch {
    return null;
  }
  const found = await Promise.all(
    names.map(async (name) => {
      const sectors = Number((await readFile(path.join(sys, name, 'size'), 'utf8').catch(() => '0')).trim());
      if (!(sectors > 0)) return null;
      const device = `/dev/${name}`;
      return { device, type: await probeDevice(under(root, device)) };
    }),
  );
  const of = (type: MediaFileSystem) => found.filter((f) => f?.type === type).map((f) => f!.device);
  return { udf: of('udf'), iso9660: of('iso9660') };
}
