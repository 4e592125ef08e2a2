/**
 * The temporary disk never loses a byte, on real loop devices (the rig: resource-disk-rig.ts): a disk used raw (a tar
 * stream, no table), bootstate's own ext4 with a damaged primary superblock, an NTFS whose root names hold newlines,
 * a first partition that is not a Microsoft reserved partition, and an old NTFS partition held open while the table
 * is rewritten. Each is left alone (or stopped before mkfs), byte for byte, with a warning naming the device.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { canSandbox } from '../e2e/ns.js';
import { attachDisk, kvpPool, MiB, pass, sandbox, sha256, useRig, warnings } from './rig.js';

useRig();

/** Runs `body` with the partition's filesystem mounted (ntfs-3g or the kernel's) at a directory of the sandbox. */
async function withMounted<T>(node: string, type: 'ntfs-3g' | 'ext4', body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(sandbox.root, 'mount-'));
  await run(type === 'ntfs-3g' ? ['ntfs-3g', node, dir] : ['mount', '-t', 'ext4', node, dir]);
  try {
    return await body(dir);
  } finally {
    await run(['umount', dir]);
    await rm(dir, { recursive: true });
  }
}

/** Azure's pristine NTFS on `loop` (MBR, type 7), with its partition known to the kernel. */
async function pristineNtfs(loop: string, start = ''): Promise<string> {
  await run(['sfdisk', '--quiet', loop], { stdin: Buffer.from(`label: dos\n${start}type=7\n`) });
  await run(['partx', '--add', loop]);
  await run(['mkntfs', '--quick', '--quiet', '--label', 'Temporary Storage', `${loop}p1`]);
  await withMounted(`${loop}p1`, 'ntfs-3g', (dir) => writeFile(path.join(dir, 'DATALOSS_WARNING_README.txt'), 'WARNING: THIS IS A TEMPORARY DISK.\n'));
  return `${loop}p1`;
}

const messages = (p: { log: Array<{ msg: string }> }) => p.log.map((l) => l.msg);

describe.skipIf(!canSandbox)('the temporary disk keeps its data', () => {
  it('[raw-data] a disk used raw (a tar stream written to the device, no table, no filesystem) is left alone, byte for byte', async () => {
    const { loop, image } = await attachDisk('blank');
    const files = path.join(sandbox.root, 'files');
    await mkdir(files);
    await writeFile(path.join(files, 'results.csv'), 'id,value\n1,42\n'.repeat(1000));
    await run(['tar', '--create', '--file', loop, '--directory', files, 'results.csv']);
    expect((await run(['blkid', '-p', loop], { allowFailure: true })).exitCode).toBe(2);
    const before = await sha256(image);
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(warnings(result)).toEqual([`temporary disk ${loop} left alone: it holds no partition table and no filesystem, but data (byte 0 is not zero): a disk used raw is never formatted`]);
    expect(await kvpPool()).toContain(`temporary disk ${loop} left alone`);
    expect(result.mounted).toBe('');
    expect(await sha256(image)).toBe(before);
  });

  it('[raw-data] data only in the middle of an otherwise blank disk is found by the spread samples', async () => {
    const { loop, image } = await attachDisk('blank');
    await run(['dd', 'if=/dev/urandom', `of=${loop}`, 'bs=1M', 'seek=30', 'count=2', 'conv=notrunc', 'status=none']);
    const before = await sha256(image);
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(warnings(result)).toEqual([expect.stringMatching(new RegExp(`^temporary disk ${loop} left alone: .*but data \\(byte 3[0-2]\\d{6} is not zero\\)`))]);
    expect(await sha256(image)).toBe(before);
  });

  it('[ours-damaged] bootstate\'s ext4 with files and its primary superblock zeroed is never made again; e2fsck -b recovers the files', async () => {
    const { loop, image } = await attachDisk('blank');
    expect((await pass('')).exitCode).toBe(0);
    await run(['partx', '--update', loop]);
    const part = `${loop}p1`;
    const data = Buffer.from(Array.from({ length: 3 * MiB }, (_, i) => (i * 7919) % 251));
    await withMounted(part, 'ext4', (dir) => writeFile(path.join(dir, 'db.bin'), data));
    const blockSize = Number(/Block size:\s+(\d+)/.exec((await run(['dumpe2fs', '-h', part])).stdout)?.[1]);
    await run(['dd', 'if=/dev/zero', `of=${part}`, 'bs=1024', 'seek=1', 'count=1', 'conv=notrunc,fsync', 'status=none']);
    expect((await run(['blkid', '-p', '-o', 'export', part])).stdout).not.toMatch(/^TYPE=/m);
    await run(['partx', '--delete', loop]);
    const before = await sha256(image);

    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(warnings(result)).toEqual([expect.stringContaining(`temporary disk ${loop} left alone: partition 1 (${part}) is bootstate's (GPT name azure-resource) but holds no filesystem blkid recognises, and data`)]);
    expect(warnings(result)[0]).toContain(`e2fsck -b 32768 ${part} (-b 8193 for 1 KiB blocks)`);
    expect(result.mounted).toBe('');
    expect(await sha256(image)).toBe(before);

    await run(['partx', '--update', loop]);
    const backup = blockSize === 1024 ? '8193' : '32768';
    const fsck = await run(['e2fsck', '-f', '-y', '-b', backup, '-B', String(blockSize), part], { allowFailure: true });
    expect(fsck.exitCode, fsck.stdout + fsck.stderr).toBeLessThan(4);
    expect((await withMounted(part, 'ext4', (dir) => readFile(path.join(dir, 'db.bin')))).equals(data)).toBe(true);
  });

  it.each([
    ['a newline', '\n'],
    ['Azure\'s name after a newline', '\nDATALOSS_WARNING_README.txt'],
    ['Azure\'s two names on two lines', 'System Volume Information\nDATALOSS_WARNING_README.txt'],
  ])('[ntfs-user-files] an NTFS whose root holds a file named %s is left alone: its names are read NUL-separated', async (_, name) => {
    const { loop, image } = await attachDisk('blank');
    const ntfs = await pristineNtfs(loop);
    await withMounted(ntfs, 'ntfs-3g', (dir) => writeFile(path.join(dir, name), 'the user\'s data\n'));
    await run(['partx', '--delete', loop]);
    const before = await sha256(image);
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(warnings(result)).toEqual([`temporary disk ${loop} left alone: the NTFS on partition 1 holds 1 entry besides DATALOSS_WARNING_README.txt`]);
    expect(await sha256(image)).toBe(before);
  });

  it.each([
    ['a basic data partition', 'EBD0A0A2-B9E5-4433-87C0-68B6B72699C7', '16M', 'is not a Microsoft reserved partition (type EBD0A0A2-B9E5-4433-87C0-68B6B72699C7)'],
    ['an MSR of 32 MiB', 'E3C9E316-0B5C-4DB8-817D-F92DF00215AE', '32M', 'is 32 MiB, not the 16 or 128 MiB of a Microsoft reserved partition'],
  ])('[first-not-msr] a pristine NTFS after %s is left alone', async (_, type, size, why) => {
    const { loop, image } = await attachDisk('blank');
    await run(['sfdisk', '--quiet', loop], { stdin: Buffer.from(`label: gpt\n,${size},${type}\n,,EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\n`) });
    await run(['partx', '--add', loop]);
    await run(['mkntfs', '--quick', '--quiet', '--label', 'Temporary Storage', `${loop}p2`]);
    await withMounted(`${loop}p2`, 'ntfs-3g', (dir) => writeFile(path.join(dir, 'DATALOSS_WARNING_README.txt'), 'WARNING\n'));
    await run(['partx', '--delete', loop]);
    const before = await sha256(image);
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(0);
    expect(warnings(result)).toEqual([`temporary disk ${loop} left alone: partition 1 ${why}; Azure's first of two partitions is one`]);
    expect(await sha256(image)).toBe(before);
  });

  it('[stale-kernel] an old NTFS partition held open while the table is rewritten: no mkfs, exit 1; the next boot formats it', async () => {
    const { loop } = await attachDisk('blank');
    const old = await pristineNtfs(loop, 'start=8192, ');
    const holder = spawn('sh', ['-c', 'exec sleep 600 < "$1"', 'hold', old], { stdio: 'ignore' });
    let stopped;
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      stopped = await pass('');
    } finally {
      holder.kill('SIGKILL');
    }
    expect(stopped.exitCode, stopped.stderr).toBe(1);
    expect(warnings(stopped)).toEqual([
      expect.stringMatching(new RegExp(`^temporary disk ${loop}: formatting failed: the kernel still uses an old partition 1 of ${loop} \\(start 8192, 122880 sectors\\) where the table has start 2048, \\d+ sectors: a re-read failed, maybe because the old partition is held open; reboot to let it read the table$`)),
    ]);
    expect(stopped.mounted).toBe('');
    for (const at of ['0', String(1 * MiB), String(4 * MiB)]) {
      expect((await run(['blkid', '-p', '-O', at, '-o', 'value', '-s', 'TYPE', loop], { allowFailure: true })).stdout.trim()).not.toBe('ext4');
    }
    expect((await readFile(`/sys/class/block/${path.basename(old)}/start`, 'utf8')).trim()).toBe('8192');

    // The next boot: the kernel reads the new table; the partition reads as zeros, so it gets its filesystem.
    await run(['partx', '--delete', loop]);
    const next = await pass('');
    expect(next.exitCode, next.stderr).toBe(0);
    expect(messages(next)).toContain(`temporary disk ${loop}: partition 1 is bootstate's (GPT name azure-resource), has no filesystem yet and reads as zeros`);
    expect(next.mounted).toBe(`${loop}p1 ext4 azure-resource`);
  });

  it('[ours-does-not-mount] bootstate\'s ext4 that does not mount is left as it is: the pass fails, nothing is made again', async () => {
    const { loop, image } = await attachDisk('blank');
    expect((await pass('')).exitCode).toBe(0);
    await run(['partx', '--update', loop]);
    // The group descriptors (right after the superblock) zeroed: blkid still sees the ext4, the kernel refuses it.
    const blockSize = Number(/Block size:\s+(\d+)/.exec((await run(['dumpe2fs', '-h', `${loop}p1`])).stdout)?.[1]);
    const descriptors = blockSize === 1024 ? 2 : 1;
    await run(['dd', 'if=/dev/zero', `of=${loop}p1`, `bs=${blockSize}`, `seek=${descriptors}`, 'count=1', 'conv=notrunc,fsync', 'status=none']);
    await run(['partx', '--delete', loop]);
    const before = await sha256(image);
    const result = await pass('');
    expect(result.exitCode, result.stderr).toBe(1);
    expect(warnings(result)).toEqual([expect.stringMatching(new RegExp(`^temporary disk ${loop}: mounting ${loop}p1 at .* failed: `))]);
    expect(await sha256(image)).toBe(before);
  });
});
