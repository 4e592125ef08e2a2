/**
 * `flock(2)` on a pool file (and the instance lock). flock locks belong to the open file description, not the
 * process, which is what cloud-init and azure-init (both `flock` writers) exclude each other with.
 *
 * The call itself is made by a tiny embedded N-API addon (src/system/native-addon.ts) — no fork, one system call. Where
 * the addon cannot load, util-linux `flock(1)` does it instead: a child that inherits our descriptor as its fd 3 and
 * runs `flock -x 3` locks *our* description, and the lock stays held after the child exits until `flock -u 3` runs the
 * same way or we close the descriptor. Each spawn forks the whole Node process with the event loop blocked, so the
 * open-lock-close helpers release by closing rather than unlocking. Node opens files with O_CLOEXEC, so no unrelated
 * child inherits the descriptor and keeps the lock alive.
 *
 * No OFD `fcntl` lock is taken: the one fcntl user, hv_kvp_daemon, re-reads the whole file before every operation
 * anyway (docs/protocol.md#kvp-locking). The API is synchronous because the KVP actor's cleanup is synchronous.
 */
import fs from 'node:fs';
import { constants as osConstants } from 'node:os';
import { BootstateError } from '../core/errors.js';
import { LOCK_EX, LOCK_SH, LOCK_UN, nativeAddon } from './native-addon.js';

export type LockMode = 'exclusive' | 'shared';

export interface LockOptions {
  /** How long to wait for a conflicting holder before failing; 0 fails at once. Default 10 s. */
  timeoutMs?: number;
  /** Lock through this util-linux `flock` binary instead of the addon; without the addon, `flock` from PATH. */
  flockPath?: string;
  /** What the lock protects, for error messages; default `the kvp pool`. */
  subject?: string;
}

export const DEFAULT_LOCK_TIMEOUT_MS = 10_000;
/** flock(1) `-E` status for "could not lock in time", distinct from its own usage/system errors. */
const CONFLICT_EXIT = 75;

function conflict(options: LockOptions, what: string): BootstateError {
  const message = `cannot ${what} ${options.subject ?? 'the kvp pool'}: another process held it for ${options.timeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS} ms`;
  return new BootstateError('KVP_FAILED', message, { retryable: true });
}

/** true when the addon did it; false when flock(1) has to. */
function nativeFlock(fd: number, op: number, options: LockOptions, what: string): boolean {
  const addon = options.flockPath === undefined ? nativeAddon() : null;
  if (!addon) return false;
  const errno = addon.flock(fd, op, Math.max(0, options.timeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS));
  if (errno === 0) return true;
  if (errno === osConstants.errno.EWOULDBLOCK) throw conflict(options, what);
  const name = Object.entries(osConstants.errno).find(([, n]) => n === errno)?.[0] ?? `errno ${errno}`;
  throw new BootstateError('KVP_FAILED', `cannot ${what} ${options.subject ?? 'the kvp pool'}: flock(2) failed: ${name}`, { retryable: false });
}

function runFlock(fd: number, args: string[], options: LockOptions, what: string): void {
  const bin = options.flockPath ?? 'flock';
  const subject = options.subject ?? 'the kvp pool';
  // node:child_process is loaded only for this fallback (the addon needs none).
  const result = process.getBuiltinModule('node:child_process').spawnSync(bin, [...args, '3'], { stdio: ['ignore', 'ignore', 'pipe', fd], encoding: 'utf8' });
  if (result.error) {
    const errno = (result.error as NodeJS.ErrnoException).code;
    const message =
      errno === 'ENOENT'
        ? `cannot ${what} ${subject}: the flock(1) command (util-linux) was not found as '${bin}'`
        : `cannot ${what} ${subject}: running '${bin}' failed: ${result.error.message}`;
    throw new BootstateError('KVP_FAILED', message, { cause: result.error, retryable: false });
  }
  if (result.status === CONFLICT_EXIT) throw conflict(options, what);
  if (result.status !== 0) {
    const detail = (result.stderr ?? '').trim() || `exit status ${result.status ?? result.signal}`;
    throw new BootstateError('KVP_FAILED', `cannot ${what} ${subject}: flock(1) failed: ${detail}`);
  }
}

/** Takes a `flock(2)` lock on the open file description behind `fd`, waiting up to `timeoutMs`. */
export function lockFd(fd: number, mode: LockMode, options: LockOptions = {}): void {
  if (nativeFlock(fd, mode === 'exclusive' ? LOCK_EX : LOCK_SH, options, 'lock')) return;
  const timeoutMs = options.timeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  const wait = timeoutMs <= 0 ? ['-n'] : ['-w', (timeoutMs / 1000).toFixed(3)];
  runFlock(fd, [mode === 'exclusive' ? '-x' : '-s', ...wait, '-E', String(CONFLICT_EXIT)], options, 'lock');
}

/** Releases the `flock(2)` lock held on the open file description behind `fd`. */
export function unlockFd(fd: number, options: LockOptions = {}): void {
  if (nativeFlock(fd, LOCK_UN, options, 'unlock')) return;
  runFlock(fd, ['-u'], options, 'unlock');
}

/** Runs `fn` while `fd` is locked; the lock is released (or dropped with the fd by the caller) even if `fn` throws. */
export function withFdLock<T>(fd: number, mode: LockMode, fn: () => T, options: LockOptions = {}): T {
  lockFd(fd, mode, options);
  try {
    return fn();
  } finally {
    try {
      unlockFd(fd, options);
    } catch {
      // Closing the descriptor, which every caller does next, releases the lock as well.
    }
  }
}

export interface OpenLockedOptions extends LockOptions {
  /** open(2) flags; default read-write, creating the file with mode 0600. */
  flags?: number;
}

/** Opens `path`, runs `fn(fd)` under an exclusive lock on it, then closes it, which releases the lock. */
export function withExclusiveLock<T>(path: string, fn: (fd: number) => T, options: OpenLockedOptions = {}): T {
  return withOpenLock(path, 'exclusive', fn, options.flags ?? fs.constants.O_RDWR | fs.constants.O_CREAT, options);
}

/** Opens `path` read-only, runs `fn(fd)` under a shared lock on it, then closes it, which releases the lock. */
export function withSharedLock<T>(path: string, fn: (fd: number) => T, options: OpenLockedOptions = {}): T {
  return withOpenLock(path, 'shared', fn, options.flags ?? fs.constants.O_RDONLY, options);
}

function withOpenLock<T>(path: string, mode: LockMode, fn: (fd: number) => T, flags: number, options: LockOptions): T {
  const fd = fs.openSync(path, flags, 0o600);
  try {
    lockFd(fd, mode, options);
    return fn(fd);
  } finally {
    fs.closeSync(fd);
  }
}
