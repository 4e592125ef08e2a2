import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { type LockOptions, lockFd, unlockFd, withExclusiveLock, withSharedLock } from '../../src/system/flock.js';
import { nativeAddonStatus } from '../../src/system/native-addon.js';
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

describe('the flock(2) addon', () => {
  it('loads here (npm run build compiles it for this architecture) and leaves no file behind', () => {
    const before = fs.readdirSync('/run').filter((name) => name.startsWith('bootstate-native-'));
    expect(nativeAddonStatus()).toBe('loaded');
    expect(fs.readdirSync('/run').filter((name) => name.startsWith('bootstate-native-'))).toEqual(before);
  });
});

const MECHANISMS: Array<[string, LockOptions]> = [
  ['the flock(2) addon', {}],
  ['the flock(1) fallback', { flockPath: 'flock' }],
];

describe.each(MECHANISMS)('flock on our own open file description, through %s', (_, via) => {
  it('holds an exclusive lock that another process using fcntl.flock cannot take until we release it', () => {
    withExclusiveLock(pool, () => {
      expect(probe('ex')).toBe('blocked 11');
      expect(probe('sh')).toBe('blocked 11');
    }, via);
    expect(probe('ex')).toBe('locked');
  });

  it('holds a shared lock that lets other readers in but keeps writers out', () => {
    withSharedLock(pool, () => {
      expect(probe('sh')).toBe('locked');
      expect(probe('ex')).toBe('blocked 11');
    }, via);
    expect(probe('ex')).toBe('locked');
  });

  it('keeps the lock until it is unlocked on the same descriptor', () => {
    const fd = fs.openSync(pool, 'r');
    try {
      lockFd(fd, 'exclusive', via);
      expect(probe('ex')).toBe('blocked 11');
      unlockFd(fd, via);
      expect(probe('ex')).toBe('locked');
    } finally {
      fs.closeSync(fd);
    }
  });

  it('releases the lock when the callback throws', () => {
    expect(() => withExclusiveLock(pool, () => { throw new Error('boom'); }, via)).toThrow('boom');
    expect(probe('ex')).toBe('locked');
  });

  it('fails with a retryable KVP error when another holder keeps the lock past the timeout', () => {
    const holder = fs.openSync(pool, 'r');
    try {
      lockFd(holder, 'exclusive', via);
      const started = Date.now();
      let error: unknown;
      try {
        withExclusiveLock(pool, () => 'never', { ...via, timeoutMs: 200 });
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

  it('fails at once with timeoutMs 0 while another holds it', () => {
    const holder = fs.openSync(pool, 'r');
    try {
      lockFd(holder, 'exclusive', via);
      expect(() => withSharedLock(pool, () => 'never', { ...via, timeoutMs: 0 })).toThrow(/another process held it for 0 ms/);
    } finally {
      fs.closeSync(holder);
    }
    expect(withSharedLock(pool, () => 'read', { ...via, timeoutMs: 0 })).toBe('read');
  });
});

describe('the flock(1) fallback', () => {
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
