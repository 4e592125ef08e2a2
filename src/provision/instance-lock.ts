/**
 * One provisioning run per machine: an exclusive `flock(2)` on `<data_dir>/bootstate.lock`, held for the whole
 * run. A second agent started meanwhile exits at once with a clear message instead of provisioning twice. The
 * kernel drops the lock when the process dies, so a crash never leaves a stale lock behind.
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/defaults.js';
import { BootstateError, toFailure } from '../core/errors.js';
import { lockFd } from '../system/flock.js';
import { openRegularSync } from '../system/open-regular.js';

export interface InstanceLock {
  path: string;
  release(): void;
}

/** Takes the instance lock or throws ALREADY_RUNNING (another agent holds it) / IO (cannot create it). */
export function acquireInstanceLock(dataDir: string): InstanceLock {
  const path = join(dataDir, LOCK_FILE);
  let fd: number;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    fd = openRegularSync(path, { flags: constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT });
  } catch (error) {
    throw new BootstateError('IO', `cannot open ${path}: ${(error as Error).message}`, { cause: error });
  }
  try {
    lockFd(fd, 'exclusive', { timeoutMs: 0, subject: path });
  } catch (error) {
    closeSync(fd);
    if (error instanceof BootstateError && error.retryable) {
      throw new BootstateError('ALREADY_RUNNING', `another bootstate is already provisioning this machine (it holds ${path})`, {
        data: [['lock', path]],
      });
    }
    throw error;
  }
  return {
    path,
    release() {
      closeSync(fd);
    },
  };
}

const LOCK_FILE = 'bootstate.lock';

/** Where the instance lock goes when `<data_dir>` cannot hold it, so two agents never provision at once. */
export const RUNTIME_LOCK_DIR = '/run/bootstate';

/**
 * One agent at a time. An unusable data directory still gets one: the lock moves to the runtime directory (under
 * the scratch root for dry and scratch runs); only when neither can hold it does the run go on unlocked.
 */
export function takeInstanceLock(config: Config, scratchDir: string | undefined): LockOutcome {
  const outcome: LockOutcome = { instance: null, warnings: [] };
  const lockDirs = [config.data_dir.path, scratchDir ? join(scratchDir, RUNTIME_LOCK_DIR) : RUNTIME_LOCK_DIR];
  for (const [index, dir] of lockDirs.entries()) {
    try {
      outcome.instance = acquireInstanceLock(dir);
      if (index > 0) outcome.warnings.push({ code: 'IO', message: `instance lock taken in ${dir} because ${config.data_dir.path} cannot hold it` });
      return outcome;
    } catch (error) {
      const failure = toFailure(error);
      if (failure.code === 'ALREADY_RUNNING') return { ...outcome, refused: { error } };
      const last = index === lockDirs.length - 1;
      outcome.warnings.push({ code: failure.code, reason: failure.reason, message: `${last ? 'running without the instance lock' : 'instance lock not taken'}: ${(error as Error).message}` });
    }
  }
  return outcome;
}

/** What the instance lock came to: held (or not, and why), or refused because another agent holds it. */
export interface LockOutcome {
  instance: InstanceLock | null;
  /** Lines for the log once it exists: why the lock moved, or why the run goes on without it. */
  warnings: Array<{ code: string; reason?: string; message: string }>;
  /** Another agent holds it: this run reports nothing. */
  refused?: { error: unknown };
}

/** Every place a run may hold the instance lock (takeInstanceLock's order). */
export const instanceLockPaths = (config: Config): string[] => [join(config.data_dir.path, LOCK_FILE), join(RUNTIME_LOCK_DIR, LOCK_FILE)];

/**
 * The pid of a process holding a flock(2) on `path` (0 when its pid is not visible here), or null when none does.
 * Read from `/proc/locks` instead of trying the lock: a probe that took it, even for an instant, could make a
 * provisioning run starting at that moment refuse to run. `/proc/locks` names a file by its inode and the device of
 * its file system's superblock, which is what stat(2) says except on btrfs, where stat gives each subvolume a device
 * of its own: the superblock's device is read from the mount the open file is on (`mnt_id` in its fdinfo, that
 * mount's line in mountinfo), so a lock is seen however it was taken (this module, flock(1), a shell's descriptor
 * whose taker has exited). On btrfs two subvolumes can hold files with the same inode number, which `/proc/locks` does
 * not tell apart: a lock on the other one reads as held, which keeps a gate waiting, never open.
 * Throws when it cannot tell (`/proc` unreadable, the mount not found): the caller must not read that as free.
 */
export function lockHolder(path: string, procLocks = '/proc/locks'): number | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const { ino, dev } = fstatSync(fd, { bigint: true });
    const devices = [deviceNumbers(dev), superblockDevice(fd)];
    for (const line of readFileSync(procLocks, 'utf8').split('\n')) {
      // `1: FLOCK  ADVISORY  WRITE 1234 fe:00:2146436 0 EOF`; waiters (`1: -> FLOCK …`) hold nothing.
      const m = /^\d+:\s+FLOCK\s+\S+\s+\S+\s+(-?\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)\s/.exec(line);
      if (!m || BigInt(m[4]!) !== ino) continue;
      const [major, minor] = [BigInt(`0x${m[2]!}`), BigInt(`0x${m[3]!}`)];
      if (devices.some((d) => d.major === major && d.minor === minor)) return Math.max(Number(m[1]), 0);
    }
    return null;
  } finally {
    closeSync(fd);
  }
}

/** Linux's dev_t as major and minor (glibc's gnu_dev_major/minor). */
function deviceNumbers(dev: bigint): { major: bigint; minor: bigint } {
  return { major: ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn), minor: (dev & 0xffn) | ((dev >> 12n) & ~0xffn) };
}

/** The device of the superblock an open file belongs to, as `/proc/locks` names it: its mount's `major:minor`. */
function superblockDevice(fd: number): { major: bigint; minor: bigint } {
  const mountId = /^mnt_id:\s*(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    // `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
    const m = /^(\d+) \d+ (\d+):(\d+) /.exec(line);
    if (m && m[1] === mountId) return { major: BigInt(m[2]!), minor: BigInt(m[3]!) };
  }
  throw new BootstateError('IO', `cannot find the mount of the open lock file (mount id ${mountId ?? 'unknown'}) in /proc/self/mountinfo`);
}
