/**
 * The zeros rule's sampling, as properties over every device size, then on real loop devices: a device reads as
 * blank only when every sampled byte is zero; one non-zero byte anywhere in a sampled range (a tar stream at the
 * head, a backup GPT at the tail, data in the middle) means data; zeroSamples makes a region prove blank.
 */
import { open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { firstNonZero, HEAD_BYTES, readsAsZeros, SAMPLE_BYTES, sampleRanges, SPREAD_SAMPLES, TAIL_BYTES, zeroSamples } from '../../src/resource-disk/zeros.js';
import { canSandbox } from '../e2e/ns.js';

const MiB = 1024 * 1024;
const TiB = 1024 * 1024 * MiB;
// Device sizes: whole sectors, from one sector to 64 TiB.
const sizeArb = fc.oneof(fc.integer({ min: 1, max: 64 * 1024 }), fc.integer({ min: 1, max: 2 ** 37 })).map((sectors) => sectors * 512);

describe('sampleRanges', () => {
  it('ranges are sorted, disjoint, inside the device and cover its head and tail whole', () => {
    fc.assert(
      fc.property(sizeArb, (size) => {
        const ranges = sampleRanges(size);
        for (const [i, r] of ranges.entries()) {
          expect(r.length).toBeGreaterThan(0);
          expect(r.offset).toBeGreaterThanOrEqual(0);
          expect(r.offset + r.length).toBeLessThanOrEqual(size);
          if (i > 0) expect(r.offset).toBeGreaterThan(ranges[i - 1]!.offset + ranges[i - 1]!.length);
        }
        const covered = (at: number) => ranges.some((r) => r.offset <= at && at < r.offset + r.length);
        expect(covered(0) && covered(Math.min(HEAD_BYTES, size) - 1)).toBe(true);
        expect(covered(size - 1) && covered(Math.max(0, size - TAIL_BYTES))).toBe(true);
        // The head and the tail are each one run of bytes.
        expect(ranges[0]).toEqual({ offset: 0, length: expect.any(Number) });
        expect(ranges[0]!.length).toBeGreaterThanOrEqual(Math.min(HEAD_BYTES, size));
        expect(ranges.at(-1)!.offset + ranges.at(-1)!.length).toBe(size);
        expect(ranges.at(-1)!.length).toBeGreaterThanOrEqual(Math.min(TAIL_BYTES, size));
      }),
      { numRuns: 300 },
    );
  });

  it('a large device is sampled evenly: every stretch of 1/64 of it holds a sampled byte, and the reads stay small', () => {
    fc.assert(
      fc.property(sizeArb.filter((s) => s >= 64 * MiB), (size) => {
        const ranges = sampleRanges(size);
        for (let i = 1; i < ranges.length; i++) {
          expect(ranges[i]!.offset - (ranges[i - 1]!.offset + ranges[i - 1]!.length)).toBeLessThan(size / 64);
        }
        const total = ranges.reduce((sum, r) => sum + r.length, 0);
        expect(total).toBeLessThanOrEqual(HEAD_BYTES + TAIL_BYTES + (SPREAD_SAMPLES + 3) * SAMPLE_BYTES);
        if (size >= 1 * TiB) expect(ranges.length).toBeGreaterThanOrEqual(64);
      }),
      { numRuns: 300 },
    );
  });

  it('is the same for the same size, and nothing for a size that is not a positive integer', () => {
    fc.assert(fc.property(sizeArb, (size) => {
      expect(sampleRanges(size)).toEqual(sampleRanges(size));
    }));
    for (const size of [0, -512, 1.5, Number.NaN, 2 ** 60]) expect(sampleRanges(size)).toEqual([]);
  });

  it('firstNonZero finds the one non-zero byte wherever it is', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4096 }), fc.nat(), fc.integer({ min: 1, max: 255 }), (length, at, value) => {
        const buffer = new Uint8Array(length);
        expect(firstNonZero(buffer)).toBe(-1);
        buffer[at % length] = value;
        expect(firstNonZero(buffer)).toBe(at % length);
      }),
    );
  });
});

describe('readsAsZeros and zeroSamples on files', () => {
  const files: string[] = [];
  afterEach(async () => {
    for (const f of files.splice(0)) await rm(f, { force: true });
  });

  async function sparse(size: number): Promise<string> {
    const file = path.join(tmpdir(), `bootstate-zeros-${process.pid}-${files.length}.img`);
    files.push(file);
    await writeFile(file, '');
    await run(['truncate', '--size', String(size), file]);
    return file;
  }

  async function poke(file: string, offset: number, value: number): Promise<void> {
    const handle = await open(file, 'r+');
    await handle.write(Buffer.from([value]), 0, 1, offset);
    await handle.close();
  }

  it('one non-zero byte in any sampled range is data, at its offset; one outside every range is not seen', async () => {
    const size = 256 * MiB;
    const file = await sparse(size);
    expect(await readsAsZeros(file, size)).toEqual({ zeros: true, bytesRead: sampleRanges(size).reduce((s, r) => s + r.length, 0) });
    const picks = fc.sample(
      fc.constantFrom(...sampleRanges(size)).chain((r) => fc.integer({ min: r.offset, max: r.offset + r.length - 1 })),
      { numRuns: 12, seed: 45 },
    );
    for (const at of [0, 1024, size - 1, size - 33 * 512, ...picks]) {
      await poke(file, at, 0x5a);
      expect(await readsAsZeros(file, size)).toEqual({ zeros: false, offset: at });
      await poke(file, at, 0);
    }
    const gap = sampleRanges(size)[1]!.offset - 1;
    await poke(file, gap, 0x5a);
    expect((await readsAsZeros(file, size)).zeros).toBe(true);
  });

  it('zeroSamples over a region full of data makes that region read as zeros, and writes nothing outside it', async () => {
    const size = 96 * MiB;
    const file = await sparse(size);
    await run(['dd', 'if=/dev/urandom', `of=${file}`, 'bs=1M', `count=${size / MiB}`, 'conv=notrunc', 'status=none']);
    const base = MiB;
    const region = size - 2 * MiB;
    const before = Buffer.alloc(MiB);
    const handle = await open(file, 'r');
    await handle.read(before, 0, MiB, 0);
    await zeroSamples(file, base, region);
    const after = Buffer.alloc(MiB);
    await handle.read(after, 0, MiB, 0);
    await handle.close();
    expect(after.equals(before)).toBe(true);
    // Read back as a region: through a loop device over exactly that extent.
    if (!canSandbox) return;
    const loop = (await run(['losetup', '--find', '--show', '--offset', String(base), '--sizelimit', String(region), file])).stdout.trim();
    try {
      expect(await readsAsZeros(loop, region)).toMatchObject({ zeros: true });
    } finally {
      await run(['losetup', '--detach', loop]);
    }
  });
});
