import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/errors.js';
import { lockFd, unlockFd, withExclusiveLock, withSharedLock } from '../../src/kvp/lock.js';
import { python, tempDir } from './helpers.js';

let dir: string;
let cleanup: () => void;
let pool: string;
beforeEach(() => {
  ({ dir, cleanup } = tempDir());
  pool = path.join(dir, '.kvp_pool_1');
  fs.writeFileSync(pool, '');
});
afterEach(() => cleanup());

const probe = (mode: 'ex' | 'sh') => python('lock-probe.py', [pool, mode]).trim();

describe('flock on our own open file description', () => {
  it('holds an exclusive lock that another process using fcntl.flock cannot take until we release it', () => {
    withExclusiveLock(pool, () => {
      expect(probe('ex')).toBe('blocked 11');
      expect(probe('sh')).toBe('blocked 11');
    });
    expect(probe('ex')).toBe('locked');
  });

  it('holds a shared lock that lets other readers in but keeps writers out', () => {
    withSharedLock(pool, () => {
      expect(probe('sh')).toBe('locked');
      expect(probe('ex')).toBe('blocked 11');
    });
    expect(probe('ex')).toBe('locked');
  });

  it('keeps the lock after the flock child exits, until flock -u runs on the same descriptor', () => {
    const fd = fs.openSync(pool, 'r');
    try {
      lockFd(fd, 'exclusive');
      expect(probe('ex')).toBe('blocked 11');
      unlockFd(fd);
      expect(probe('ex')).toBe('locked');
    } finally {
      fs.closeSync(fd);
    }
  });

  it('releases the lock when the callback throws', () => {
    expect(() => withExclusiveLock(pool, () => { throw new Error('boom'); })).toThrow('boom');
    expect(probe('ex')).toBe('locked');
  });

  it('fails with a retryable KVP error when another holder keeps the lock past the timeout', () => {
    const holder = fs.openSync(pool, 'r');
    try {
      lockFd(holder, 'exclusive');
      const started = Date.now();
      let error: unknown;
      try {
        withExclusiveLock(pool, () => 'never', { timeoutMs: 200 });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(BootstateError);
      expect((error as BootstateError).code).toBe('KVP_FAILED');
      expect((error as BootstateError).retryable).toBe(true);
      expect((error as BootstateError).message).toMatch(/another process held it for 200 ms/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    } finally {
      fs.closeSync(holder);
    }
  });

  it('explains a missing flock binary instead of crashing', () => {
    let error: unknown;
    try {
      withExclusiveLock(pool, () => 'never', { flockPath: path.join(dir, 'no-such-flock') });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(BootstateError);
    expect((error as BootstateError).message).toMatch(/flock\(1\) command \(util-linux\) was not found/);
  });
});
