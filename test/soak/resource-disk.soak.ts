/**
 * Soak: a booted Debian (test/boot's harness) rebooted again and again with user data on its temporary disk, in each
 * layout a user may leave it: a disk used raw (a tar stream, no table), bootstate's own ext4 holding files, that ext4
 * with its primary superblock damaged, and an NTFS holding a user file. bootstate-resource-disk.service runs on every
 * boot; after each one the data must be there, byte for byte: the whole image's checksum for the layouts bootstate
 * must leave alone, each file's checksum for its own ext4, which it mounts (a mount writes the superblock's times).
 * SOAK_REBOOTS boots per layout (default 50). Run by `npm run soak`, not by `npm test`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { debianRoot, installDeb } from '../boot/debian-root.js';
import { createMachine, type Machine } from '../boot/machine.js';
import { configLayer, createRig, imdsDocument, type Rig } from '../boot/scenario.js';
import { canSandbox } from '../e2e/ns.js';

const REBOOTS = Number(process.env.SOAK_REBOOTS ?? 50);
const TAG = `bss${process.pid}${randomBytes(2).toString('hex')}`;
const MiB = 1024 * 1024;
const LAYOUTS = ['raw', 'own-ext4', 'damaged-ext4', 'ntfs-user-file'] as const;
type Layout = (typeof LAYOUTS)[number];

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const userData = (seed: number) => Buffer.from(Array.from({ length: 2 * MiB + 123 }, (_, i) => (i * 7919 + seed) % 251));

/** What every boot must show: the one warning of the row that leaves the disk, or bootstate's ext4 mounted. */
const OUTCOME: Record<Layout, unknown> = {
  raw: expect.stringMatching(/^temporary disk \/dev\/sdb left alone: .*a disk used raw is never formatted/),
  'own-ext4': '[mounted /dev/sdb1]',
  'damaged-ext4': expect.stringMatching(/^temporary disk \/dev\/sdb left alone: partition 1 \(\/dev\/sdb1\) is bootstate's .* e2fsck -b 32768 \/dev\/sdb1/),
  'ntfs-user-file': expect.stringMatching(/^temporary disk \/dev\/sdb left alone: the NTFS on partition 1 holds 1 entry besides DATALOSS_WARNING_README.txt/),
};

let rig: Rig;
let layers: string[];
const loops: string[] = [];

/** Runs `body` with `node` mounted (ntfs-3g or ext4) in a directory of the work tree. */
async function withMounted<T>(node: string, type: 'ntfs-3g' | 'ext4', body: (dir: string) => Promise<T>, ro = false): Promise<T> {
  const dir = await mkdtemp(path.join(rig.workDir, 'mount-'));
  await run(type === 'ntfs-3g' ? ['ntfs-3g', ...(ro ? ['-o', 'ro'] : []), node, dir] : ['mount', '-t', 'ext4', ...(ro ? ['-o', 'ro,noload'] : []), node, dir]);
  try {
    return await body(dir);
  } finally {
    await run(['umount', dir]);
    await rm(dir, { recursive: true });
  }
}

/** A 64 MiB loop device holding `layout` with the user's file; the kernel keeps no partition of it (a fresh boot). */
async function disk(layout: Layout, data: Buffer): Promise<{ loop: string; image: string }> {
  const image = path.join(rig.workDir, `${layout}.img`);
  await writeFile(image, '');
  await run(['truncate', '--size', String(64 * MiB), image]);
  const loop = (await run(['losetup', '--find', '--show', image])).stdout.trim();
  loops.push(loop);
  const file = path.join(rig.workDir, `${layout}.bin`);
  await writeFile(file, data);
  if (layout === 'raw') {
    await run(['tar', '--create', '--file', loop, '--directory', rig.workDir, `${layout}.bin`]);
  } else if (layout === 'ntfs-user-file') {
    await run(['sfdisk', '--quiet', loop], { stdin: Buffer.from('label: dos\n,,7\n') });
    await run(['partx', '--add', loop]);
    await run(['mkntfs', '--quick', '--quiet', '--label', 'Temporary Storage', `${loop}p1`]);
    await withMounted(`${loop}p1`, 'ntfs-3g', async (dir) => {
      await writeFile(path.join(dir, 'DATALOSS_WARNING_README.txt'), 'WARNING: THIS IS A TEMPORARY DISK.\n');
      await writeFile(path.join(dir, 'user.bin'), data);
    });
  } else {
    // As bootstate formats it: a GPT with one partition named by the label, ext4 with the label.
    await run(['sfdisk', '--quiet', loop], { stdin: Buffer.from('label: gpt\nname="azure-resource", type=linux\n') });
    await run(['partx', '--add', loop]);
    await run(['mkfs.ext4', '-q', '-F', '-L', 'azure-resource', `${loop}p1`]);
    await withMounted(`${loop}p1`, 'ext4', (dir) => writeFile(path.join(dir, 'user.bin'), data));
    if (layout === 'damaged-ext4') await run(['dd', 'if=/dev/zero', `of=${loop}p1`, 'bs=1024', 'seek=1', 'count=1', 'conv=notrunc,fsync', 'status=none']);
  }
  await run(['partx', '--delete', loop], { allowFailure: true });
  return { loop, image };
}

/** What must not change across boots: the whole image, or (bootstate's ext4, which it mounts) the user's file. */
async function fingerprint(layout: Layout, loop: string, image: string): Promise<string> {
  if (layout !== 'own-ext4') return sha256(await readFile(image));
  await run(['partx', '--update', loop]);
  try {
    return sha256(await withMounted(`${loop}p1`, 'ext4', (dir) => readFile(path.join(dir, 'user.bin')), true));
  } finally {
    await run(['partx', '--delete', loop], { allowFailure: true });
  }
}

interface Soaked {
  boots: number;
  /** Fingerprints that differed from the first, by boot number. */
  changed: Array<{ boot: number; fingerprint: string }>;
  /** The temporary disk unit's outcome on each boot, deduplicated. */
  outcomes: string[];
  seconds: number;
}

async function soak(layout: Layout, machine: Machine, loop: string, image: string, expected: string): Promise<Soaked> {
  const started = Date.now();
  const changed: Soaked['changed'] = [];
  const outcomes = new Set<string>();
  for (let n = 1; n <= REBOOTS; n++) {
    const boot = await machine.boot();
    try {
      await boot.settled();
      for (const until = Date.now() + 300_000; Date.now() < until; ) {
        const state = (await boot.exec(['systemctl', 'show', 'bootstate-resource-disk.service', '-p', 'ActiveState', '--value'])).stdout.trim();
        if (state !== 'activating' && state !== '') break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const log = (await boot.exec(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate-resource-disk.service', '-o', 'cat', '-p', 'warning'])).stdout;
      const mounted = (await boot.exec(['findmnt', '--noheadings', '--output', 'SOURCE', '--mountpoint', '/mnt'])).stdout.trim();
      outcomes.add([...log.split('\n').filter((l) => l.includes('temporary disk')), ...(mounted ? [`[mounted ${mounted}]`] : [])].join(' | '));
    } finally {
      await boot.shutdown();
    }
    const now = await fingerprint(layout, loop, image);
    if (now !== expected) changed.push({ boot: n, fingerprint: now });
  }
  return { boots: REBOOTS, changed, outcomes: [...outcomes], seconds: Math.round((Date.now() - started) / 1000) };
}

describe.skipIf(!canSandbox)(`the temporary disk across ${REBOOTS} reboots`, () => {
  beforeAll(async () => {
    rig = await createRig();
    const root = await debianRoot(['fdisk', 'ntfs-3g']);
    const layer = path.join(rig.workDir, 'deb-layer-disk');
    await installDeb(root, rig.deb!, layer);
    // Swap off: a swap file would be (re)made on the mounted ext4, which is not what the soak watches.
    layers = [await configLayer(rig, 'resource-disk', '[resource_disk]\nswap_size_mb = 0\n'), path.join(layer, 'upper'), root];
  }, 1_200_000);

  afterAll(async () => {
    for (const loop of loops) {
      await run(['partx', '--delete', loop], { allowFailure: true });
      await run(['losetup', '--detach', loop], { allowFailure: true });
    }
    await rig?.cleanup();
  }, 120_000);

  it.each(LAYOUTS)('%s: no byte lost', async (layout) => {
    const data = userData(LAYOUTS.indexOf(layout));
    const { loop, image } = await disk(layout, data);
    const expected = await fingerprint(layout, loop, image);
    if (layout === 'own-ext4') expect(expected).toBe(sha256(data));
    const machine = await createMachine({
      name: `${TAG}${LAYOUTS.indexOf(layout)}`,
      workDir: rig.workDir,
      layers,
      imdsDocument: imdsDocument(rig.publicKey),
      temporaryDisk: { device: loop, name: 'sdb' },
    });
    try {
      const result = await soak(layout, machine, loop, image, expected);
      console.log(`soak ${layout}: ${JSON.stringify(result)}`);
      expect(result.changed).toEqual([]);
      expect(result.outcomes).toEqual([OUTCOME[layout]]);
    } finally {
      await machine.destroy();
    }
  }, 24 * 3_600_000);
});
