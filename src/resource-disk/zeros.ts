/**
 * The zeros rule: a device without a partition table or filesystem signature is blank only when it reads as zeros
 * wherever a table, a filesystem or a user's raw data would show: its head (partition tables, every filesystem's
 * first superblock, LVM and md labels), its tail (the backup GPT, md 1.0 and ZFS labels), btrfs's mirror superblocks
 * and samples spread evenly over the rest (a database or a `tar` stream written to the raw device). Any non-zero byte
 * read means data. `sampleRanges` is the pure part: which bytes are read; `readsAsZeros` reads them, and
 * `zeroSamples` writes zeros there, so a partition bootstate made and then was cut short on still proves blank.
 */
import { open } from 'node:fs/promises';

export interface ByteRange {
  offset: number;
  length: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/** The first and last bytes read whole. */
export const HEAD_BYTES = 2 * MiB;
export const TAIL_BYTES = 2 * MiB;
/** How many samples are spread over the device between head and tail, and how long each is. */
export const SPREAD_SAMPLES = 128;
export const SAMPLE_BYTES = 64 * KiB;
/** btrfs's mirror superblocks (64 KiB, 64 MiB, 256 GiB, 1 PiB): the first lies in the head. */
export const BTRFS_MIRRORS = [64 * MiB, 256 * GiB, 1024 * 1024 * GiB];
const ALIGN = 4096;

const down = (n: number) => Math.floor(n / ALIGN) * ALIGN;

/**
 * The byte ranges of a device of `size` bytes that must read as zeros: sorted, disjoint, inside the device.
 *
 * @example
 *   sampleRanges(1024 ** 3).at(0)   // { offset: 0, length: 2097152 }: the head
 *   sampleRanges(1024 ** 3).at(-1)  // { offset: 1071644672, length: 2097152 }: the tail
 */
export function sampleRanges(size: number): ByteRange[] {
  if (!Number.isSafeInteger(size) || size <= 0) return [];
  const wanted: ByteRange[] = [
    { offset: 0, length: HEAD_BYTES },
    { offset: size - TAIL_BYTES, length: TAIL_BYTES },
    ...BTRFS_MIRRORS.map((offset) => ({ offset, length: SAMPLE_BYTES })),
  ];
  const step = Math.floor(size / (SPREAD_SAMPLES + 1));
  for (let i = 1; i <= SPREAD_SAMPLES; i++) wanted.push({ offset: down(step * i), length: SAMPLE_BYTES });
  return merge(wanted, size);
}

/** Clips each range to [0, size), sorts them and joins those that touch or overlap. */
function merge(ranges: ByteRange[], size: number): ByteRange[] {
  const clipped = ranges
    .map(({ offset, length }) => {
      const start = Math.max(0, offset);
      return { offset: start, length: Math.min(size, offset + length) - start };
    })
    .filter((r) => r.length > 0)
    .sort((a, b) => a.offset - b.offset);
  const out: ByteRange[] = [];
  for (const r of clipped) {
    const last = out.at(-1);
    if (last && r.offset <= last.offset + last.length) last.length = Math.max(last.length, r.offset + r.length - last.offset);
    else out.push({ ...r });
  }
  return out;
}

/** The offset of the first non-zero byte of `buffer`, or -1. */
export function firstNonZero(buffer: Uint8Array): number {
  return buffer.findIndex((b) => b !== 0);
}

/** What reading the sampled ranges showed: all zeros, or the first non-zero byte's offset. */
export type ZerosProof = { zeros: true; bytesRead: number } | { zeros: false; offset: number };

const CHUNK = 1 * MiB;

/** Reads every range of `sampleRanges(size)` from `node`; a short read or an I/O error throws. */
export async function readsAsZeros(node: string, size: number): Promise<ZerosProof> {
  const handle = await open(node, 'r');
  try {
    const buffer = Buffer.alloc(CHUNK);
    let bytesRead = 0;
    for (const range of sampleRanges(size)) {
      for (let done = 0; done < range.length; ) {
        const want = Math.min(CHUNK, range.length - done);
        const at = range.offset + done;
        const { bytesRead: got } = await handle.read(buffer, 0, want, at);
        if (got !== want) throw new Error(`${node}: short read at byte ${at} (${got} of ${want})`);
        const hit = firstNonZero(buffer.subarray(0, got));
        if (hit >= 0) return { zeros: false, offset: at + hit };
        done += got;
        bytesRead += got;
      }
    }
    return { zeros: true, bytesRead };
  } finally {
    await handle.close();
  }
}

/**
 * Writes zeros over `sampleRanges(size)` of the region starting `base` bytes into `node` (a new partition, through
 * its disk), then syncs: afterwards that region proves blank to `readsAsZeros`.
 */
export async function zeroSamples(node: string, base: number, size: number): Promise<void> {
  const handle = await open(node, 'r+');
  try {
    const zeros = Buffer.alloc(CHUNK);
    for (const range of sampleRanges(size)) {
      for (let done = 0; done < range.length; ) {
        const want = Math.min(CHUNK, range.length - done);
        const { bytesWritten } = await handle.write(zeros, 0, want, base + range.offset + done);
        if (bytesWritten !== want) throw new Error(`${node}: short write at byte ${base + range.offset + done}`);
        done += want;
      }
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}
