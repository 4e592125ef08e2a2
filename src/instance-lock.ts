/**
 * One provisioning run per machine: an exclusive `flock(2)` on `<data_dir>/bootstate.lock`, held for the whole
 * run. A second agent started meanwhile exits at once with a clear message instead of provisioning twice. The
 * kernel drops the lock when the process dies, so a crash never leaves a stale lock behind.
 */
import { closeSync, constants, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { BootstateError } from './core/errors.js';
import { lockFd } from './kvp/lock.js';
import { openRegularSync } from './os/open-regular.js';

export interface InstanceLock {
  path: string;
  release(): void;
}

/** Takes the instance lock or throws ALREADY_RUNNING (another agent holds it) / IO (cannot create it). */
export function acquireInstanceLock(dataDir: string): InstanceLock {
  const path = join(dataDir, 'bootstate.lock');
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
