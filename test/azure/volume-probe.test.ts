import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { fileSystemOf, probeMediaDevices } from '../../src/azure/volume-probe.js';

const work = mkdtempSync(path.join(tmpdir(), 'volume-probe-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const SECTOR = 2048;
/** An image whose sectors from 16 on carry these standard identifiers (type byte 0, version 1). */
function descriptors(...ids: string[]): Buffer {
  const image = Buffer.alloc((16 + ids.length + 4) * SECTOR);
  ids.forEach((id, i) => {
    const at = (16 + i) * SECTOR;
    image[at] = id === 'CD001' && i === ids.length - 1 ? 255 : 0;
    image.write(id, at + 1, 'latin1');
    image[at + 6] = 1;
  });
  return image;
}
const header = (image: Buffer) => image.subarray(16 * SECTOR);

function isoImage(): Buffer {
  const content = path.join(work, 'content');
  mkdirSync(content, { recursive: true });
  writeFileSync(path.join(content, 'ovf-env.xml'), '<Environment/>');
  const iso = path.join(work, 'media.iso');
  execFileSync('xorriso', ['-as', 'mkisofs', '-quiet', '-V', 'rd_rdfe_stable', '-o', iso, content], { stdio: 'pipe' });
  return readFileSync(iso);
}

describe('volume descriptors', () => {
  it('recognise an ISO 9660 image made by xorriso', () => {
    expect(fileSystemOf(header(isoImage()))).toBe('iso9660');
  });

  it('recognise UDF by its NSR02/NSR03 descriptor, bridge discs included, as blkid does', () => {
    expect(fileSystemOf(header(descriptors('BEA01', 'NSR02', 'TEA01')))).toBe('udf');
    expect(fileSystemOf(header(descriptors('BEA01', 'NSR03', 'TEA01')))).toBe('udf');
    expect(fileSystemOf(header(descriptors('CD001', 'CD001', 'BEA01', 'NSR02', 'TEA01')))).toBe('udf');
  });

  it('find nothing on zeros, other file systems, or a recognition sequence without NSR', () => {
    expect(fileSystemOf(Buffer.alloc(16 * SECTOR))).toBeNull();
    expect(fileSystemOf(header(descriptors('BEA01', 'TEA01')))).toBeNull();
    expect(fileSystemOf(Buffer.alloc(0))).toBeNull();
  });

  it('never call random bytes a file system unless they carry its identifier, and never throw', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4 * SECTOR }), (bytes) => {
        const buffer = Buffer.from(bytes);
        const type = fileSystemOf(buffer);
        if (type === 'iso9660') expect(buffer.toString('latin1', 1, 6)).toBe('CD001');
        if (type === 'udf') expect(buffer.toString('latin1')).toMatch(/NSR0[23]/);
      }),
    );
  });
});

describe('probing the block devices', () => {
  it('lists UDF devices, then ISO 9660 ones, skipping empty devices and other file systems', async () => {
    const root = mkdtempSync(path.join(work, 'root-'));
    const device = (name: string, sectors: number, image?: Buffer) => {
      mkdirSync(path.join(root, 'sys/class/block', name), { recursive: true });
      writeFileSync(path.join(root, 'sys/class/block', name, 'size'), `${sectors}\n`);
      mkdirSync(path.join(root, 'dev'), { recursive: true });
      if (image) writeFileSync(path.join(root, 'dev', name), image);
    };
    device('loop0', 1000, isoImage());
    device('loop1', 0, isoImage());
    device('sda', 1000, Buffer.alloc(64 * SECTOR));
    device('sda1', 1000);
    device('sr0', 1000, descriptors('BEA01', 'NSR02', 'TEA01'));
    expect(await probeMediaDevices(root)).toEqual({ udf: ['/dev/sr0'], iso9660: ['/dev/loop0'] });
  });

  it('answers null when /sys/class/block is missing, so the caller asks blkid', async () => {
    expect(await probeMediaDevices(mkdtempSync(path.join(work, 'empty-')))).toBeNull();
  });
});
