/**
 * Whether a provisioning run holds the instance lock, as `bootstate gate` asks it: read from /proc/locks, matched to
 * the lock file by inode and the device of its file system's superblock (which stat(2) gives except on btrfs). The
 * holders are real: flock(1) on a real file, and on a real btrfs on a loop device, in a mount namespace of the test's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { run } from '../../src/system/exec.js';
import { acquireInstanceLock, lockHolder } from '../../src/provision/instance-lock.js';
import { canSandbox, REPO } from '../e2e/ns.js';

const dirs: string[] = [];
const holders: ChildProcess[] = [];

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'bootstate-lock-'));
  dirs.push(dir);
  return dir;
}

/** flock(1) holding `file` exclusively until its stdin closes; resolves once the lock is taken. */
async function hold(file: string): Promise<ChildProcess> {
  const holder = spawn('flock', ['--exclusive', file, 'sh', '-c', 'echo locked; read _'], { stdio: ['pipe', 'pipe', 'inherit'] });
  holders.push(holder);
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once('data', () => resolve());
    holder.once('error', reject);
  });
  return holder;
}

afterEach(async () => {
  for (const holder of holders.splice(0)) {
    holder.stdin!.end();
    if (holder.exitCode === null) await new Promise((resolve) => holder.once('exit', resolve));
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('lockHolder', () => {
  it('is null for a lock file nobody holds, and for one that does not exist', () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'bootstate.lock'), '');
    expect(lockHolder(path.join(dir, 'bootstate.lock'))).toBeNull();
    expect(lockHolder(path.join(dir, 'missing.lock'))).toBeNull();
  });

  it('names the pid of a process holding the flock, and is null again once it let go', async () => {
    const file = path.join(tempDir(), 'bootstate.lock');
    writeFileSync(file, '');
    const holder = await hold(file);
    expect(lockHolder(file)).toBe(holder.pid);
    holder.stdin!.end();
    await new Promise((resolve) => holder.once('exit', resolve));
    expect(lockHolder(file)).toBeNull();
  });

  it('sees the lock a provisioning run takes (acquireInstanceLock), and leaves a free lock free', () => {
    const dir = tempDir();
    const lock = acquireInstanceLock(dir);
    try {
      expect(lockHolder(lock.path)).toBe(process.pid);
    } finally {
      lock.release();
    }
    // Had the probe taken the lock, a run starting now would be refused.
    acquireInstanceLock(dir).release();
  });

  it('reads a /proc/locks line as held by device and inode, and ignores other inodes and other devices', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'bootstate.lock');
    writeFileSync(file, '');
    const { ino, dev } = statSync(file);
    const device = `${(Math.floor(dev / 256) & 0xfff).toString(16).padStart(2, '0')}:${(dev & 0xff).toString(16).padStart(2, '0')}`;
    const procLocks = path.join(dir, 'locks');
    writeFileSync(procLocks, `1: FLOCK  ADVISORY  WRITE 4321 ${device}:${ino} 0 EOF\n2: -> FLOCK  ADVISORY  WRITE 1 ${device}:${ino} 0 EOF\n`);
    expect(lockHolder(file, procLocks)).toBe(4321);
    writeFileSync(procLocks, `1: FLOCK  ADVISORY  WRITE 4321 ${device}:${ino + 1} 0 EOF\n2: -> FLOCK  ADVISORY  WRITE 1 ${device}:${ino} 0 EOF\n`);
    expect(lockHolder(file, procLocks)).toBeNull();
    writeFileSync(procLocks, `1: FLOCK  ADVISORY  WRITE 4321 ff:fe:${ino} 0 EOF\n`);
    expect(lockHolder(file, procLocks)).toBeNull();
  });

  it('throws, never says free, when /proc/locks cannot be read', () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'bootstate.lock'), '');
    expect(() => lockHolder(path.join(dir, 'bootstate.lock'), dir)).toThrow(/EISDIR/);
  });
});

/** A btrfs on a loop device, mounted in a mount namespace of its own, where test/provision/lock-probe.ts runs. */
describe.skipIf(!canSandbox)('lockHolder on a real btrfs, where stat(2) and /proc/locks name different devices', () => {
  it('sees the instance lock taken by the native addon and through flock(1) (whose process has exited), on the top-level subvolume and another, and free once let go', async () => {
    const dir = tempDir();
    const image = path.join(dir, 'btrfs.img');
    await run(['truncate', '-s', '200M', image]);
    await run(['mkfs.btrfs', '-q', image]);
    const loop = (await run(['losetup', '--find', '--show', image])).stdout.trim();
    try {
      const mnt = path.join(dir, 'mnt');
      const script = `set -eu
mount -t btrfs "$1" "$2"
btrfs -q subvolume create "$2/sub"
: > "$2/bootstate.lock"
: > "$2/sub/bootstate.lock"
shift 2
exec "$@"`;
      await run(['mkdir', mnt]);
      const top = path.join(mnt, 'bootstate.lock');
      const sub = path.join(mnt, 'sub/bootstate.lock');
      const probe = await run(
        ['unshare', '--mount', '--propagation', 'private', '--fork', 'sh', '-c', script, 'btrfs-locks', loop, mnt, process.execPath, '--import', 'tsx', 'test/provision/lock-probe.ts', top, sub],
        { cwd: REPO, timeoutMs: 120_000 },
      );
      const report = JSON.parse(probe.stdout) as Record<string, any>;
      expect(report.addon).toBe(true);
      for (const file of [top, sub]) {
        const seen = report[file];
        // The premise: /proc/locks names another device than stat(2) does.
        expect(seen.addon.procLocks).toMatch(/FLOCK/);
        expect(seen.addon.procLocks).not.toContain(` ${seen.statDevice}:`);
        expect([seen.free, seen.after], file).toEqual([null, null]);
        expect(seen.addon.holder, file).toBe(report.pid);
        // The flock(1) child that took it has exited: its pid, not a live holder's.
        expect(seen.flock1.holder, file).not.toBeNull();
        expect(seen.flock1.holder, file).not.toBe(report.pid);
      }
    } finally {
      await run(['losetup', '--detach', loop], { allowFailure: true });
    }
  }, 180_000);
});

