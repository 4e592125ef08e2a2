/**
 * Whether a provisioning run holds the instance lock, as `bootstate gate` asks it: read from /proc/locks, matched to
 * the lock file by device and inode, or by inode and the holder's open file where stat and /proc/locks disagree on
 * the device (btrfs subvolumes). The holders are real: flock(1) on a real file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireInstanceLock, lockHolder } from '../../src/run/instance-lock.js';

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

  it('matches by inode and the holder\'s open file when /proc/locks names another device, and ignores other inodes', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'bootstate.lock');
    writeFileSync(file, '');
    const holder = await hold(file);
    const { ino } = statSync(file);
    const procLocks = path.join(dir, 'locks');
    writeFileSync(procLocks, `1: FLOCK  ADVISORY  WRITE ${holder.pid} 00:3a:${ino} 0 EOF\n2: -> FLOCK  ADVISORY  WRITE 1 00:3a:${ino} 0 EOF\n`);
    expect(lockHolder(file, procLocks)).toBe(holder.pid);
    writeFileSync(procLocks, `1: FLOCK  ADVISORY  WRITE ${holder.pid} 00:3a:${ino + 1} 0 EOF\n`);
    expect(lockHolder(file, procLocks)).toBeNull();
    // Same inode on another device, held by a process without this file open: someone else's lock.
    writeFileSync(procLocks, `1: FLOCK  ADVISORY  WRITE ${process.pid} 00:3a:${ino} 0 EOF\n`);
    expect(lockHolder(file, procLocks)).toBeNull();
    expect(readFileSync('/proc/locks', 'utf8')).toContain(`:${ino} `);
  });
});
