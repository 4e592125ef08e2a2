import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { MAX_RECORDS, RECORD_BYTES, encodeRecords } from '../../src/kvp/codec.js';
import { KvpStore, poolPath, readBootTime } from '../../src/kvp/store.js';
import { rawRecords, tempDir } from './helpers.js';

let dir: string;
let cleanup: () => void;
beforeEach(() => ({ dir, cleanup } = tempDir()));
afterEach(() => cleanup());

const rec = (key: string, value: string) => ({ key, value });
const fill = (file: string, records: Array<{ key: string; value: string }>) => fs.writeFileSync(file, encodeRecords(records));

function kvpError(fn: () => unknown): BootstateError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(BootstateError);
    return error as BootstateError;
  }
  throw new Error('expected a BootstateError');
}

describe('KvpStore', () => {
  it('names pool files .kvp_pool_<n> under /var/lib/hyperv by default', () => {
    expect(poolPath()).toBe('/var/lib/hyperv/.kvp_pool_1');
    expect(new KvpStore({ dir, pool: 3 }).path).toBe(path.join(dir, '.kvp_pool_3'));
    expect(() => poolPath(dir, 7)).toThrow(/0\.\.4/);
  });

  it('creates a missing directory 0755 and a new pool file 0600 on the first write', () => {
    const store = new KvpStore({ dir: path.join(dir, 'hyperv') });
    store.append([rec('a', '1')]);
    expect(fs.statSync(path.join(dir, 'hyperv')).mode & 0o777).toBe(0o755 & ~process.umask());
    expect(fs.statSync(store.path).mode & 0o777).toBe(0o600);
    expect(fs.statSync(store.path).size).toBe(RECORD_BYTES);
  });

  it('leaves the mode of an existing pool file alone', () => {
    const file = path.join(dir, 'pool');
    fs.writeFileSync(file, '', { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    new KvpStore({ path: file }).append([rec('a', '1')]);
    expect(fs.statSync(file).mode & 0o777).toBe(0o644);
  });

  it('appends batches in order and keeps duplicates; dump shows them all, read and entries take the last', () => {
    const store = new KvpStore({ dir });
    expect(store.append([rec('a', '1'), rec('b', '2')])).toEqual({ written: 2, dropped: 0 });
    store.append([rec('a', '3')]);
    expect(store.dump()).toEqual([rec('a', '1'), rec('b', '2'), rec('a', '3')]);
    expect(store.read('a')).toBe('3');
    expect(store.read('missing')).toBeUndefined();
    expect([...store.entries()]).toEqual([['a', '3'], ['b', '2']]);
  });

  it('reads a missing pool as empty without creating it', () => {
    const store = new KvpStore({ dir });
    expect(store.dump()).toEqual([]);
    expect(store.delete('x')).toBe(0);
    expect(store.info()).toMatchObject({ exists: false, records: 0 });
    expect(fs.existsSync(store.path)).toBe(false);
  });

  it('validates every record of a batch before writing any of it', () => {
    const store = new KvpStore({ dir });
    kvpError(() => store.append([rec('ok', '1'), rec('bad', 'x'.repeat(1023))]));
    expect(fs.existsSync(store.path)).toBe(false);
  });

  it('upsert overwrites the first record of a key in place and removes later duplicates, keeping the order of the rest', () => {
    const store = new KvpStore({ dir });
    store.append([rec('r', 'old1'), rec('x', '1'), rec('r', 'old2'), rec('y', '2'), rec('r', 'old3')]);
    expect(store.upsert('r', 'new')).toEqual({ action: 'replaced', removedDuplicates: 2 });
    expect(rawRecords(store.path)).toEqual([rec('r', 'new'), rec('x', '1'), rec('y', '2')]);
  });

  it('upsert appends an absent key, and a second upsert replaces rather than accumulates', () => {
    const store = new KvpStore({ dir });
    store.append([rec('t', '1')]);
    expect(store.upsert('PROVISIONING_REPORT', 'result=error').action).toBe('appended');
    expect(store.upsert('PROVISIONING_REPORT', 'result=success').action).toBe('replaced');
    expect(rawRecords(store.path)).toEqual([rec('t', '1'), rec('PROVISIONING_REPORT', 'result=success')]);
  });

  it('upsert shrinks the slot of a long value in place with zero padding', () => {
    const store = new KvpStore({ dir });
    store.upsert('k', 'x'.repeat(1000));
    store.upsert('k', 'y');
    const bytes = fs.readFileSync(store.path);
    expect(bytes.length).toBe(RECORD_BYTES);
    expect(bytes.subarray(513).every((b) => b === 0)).toBe(true);
  });

  it('delete removes every record of a key and keeps the others in order', () => {
    const store = new KvpStore({ dir });
    store.append([rec('a', '1'), rec('b', '2'), rec('a', '3'), rec('c', '4')]);
    expect(store.delete('a')).toBe(2);
    expect(rawRecords(store.path)).toEqual([rec('b', '2'), rec('c', '4')]);
    expect(fs.statSync(store.path).size).toBe(2 * RECORD_BYTES);
  });

  it('delete accepts keys longer than the safe limit so oversize records of other writers can be removed', () => {
    const file = path.join(dir, 'pool');
    const long = 'k'.repeat(400);
    fs.writeFileSync(file, encodeRecords([rec(long, 'v'), rec('b', '2')], { unsafe: true }));
    expect(new KvpStore({ path: file }).delete(long)).toBe(1);
    expect(rawRecords(file)).toEqual([rec('b', '2')]);
  });

  it('rewrites other writers\' records byte for byte when compacting', () => {
    const file = path.join(dir, 'pool');
    const foreign = encodeRecords([rec('other', 'x')]);
    foreign[512 + 2047] = 0x41; // a value filling the whole field, which safe mode would refuse to encode
    fs.writeFileSync(file, Buffer.concat([encodeRecords([rec('a', '1')]), foreign, encodeRecords([rec('a', '2')])]));
    new KvpStore({ path: file }).delete('a');
    expect(fs.readFileSync(file).equals(foreign)).toBe(true);
  });

  it('still upserts into a pool holding another writer\'s record with a UTF-8 character cut in half, leaving its bytes alone', () => {
    const file = path.join(dir, 'pool');
    const foreign = encodeRecords([rec('azure-init|chunk', 'ab€')]);
    foreign.fill(0, 512 + 4); // keep only the first byte of the 3-byte '€'
    fs.writeFileSync(file, foreign);
    const store = new KvpStore({ path: file });
    expect(() => store.dump()).toThrow(/not valid UTF-8/);
    expect(store.upsert('PROVISIONING_REPORT', 'result=error').action).toBe('appended');
    expect(store.delete('PROVISIONING_REPORT')).toBe(1);
    expect(fs.readFileSync(file).equals(foreign)).toBe(true);
    expect(new KvpStore({ path: file, lossy: true }).read('azure-init|chunk')).toBe('ab\uFFFD');
  });

  it('clear empties the pool and keeps the same file (inode) so other writers\' descriptors stay valid', () => {
    const store = new KvpStore({ dir });
    store.append([rec('a', '1')]);
    const inode = fs.statSync(store.path).ino;
    store.upsert('b', '2');
    store.delete('a');
    store.clear();
    expect(fs.statSync(store.path)).toMatchObject({ size: 0, ino: inode });
  });

  it('refuses a pool whose size is not a multiple of 2,560 without changing it', () => {
    const file = path.join(dir, 'pool');
    fill(file, [rec('a', '1')]);
    fs.appendFileSync(file, Buffer.alloc(100, 7));
    const store = new KvpStore({ path: file });
    for (const op of [() => store.dump(), () => store.append([rec('b', '2')]), () => store.upsert('b', '2'), () => store.delete('a')]) {
      const error = kvpError(op);
      expect(error.code).toBe('KVP_FAILED');
      expect(error.message).toMatch(/is corrupt: 2660 bytes is not a multiple of 2560/);
    }
    expect(fs.statSync(file).size).toBe(2660);
    expect(store.info()).toMatchObject({ corrupt: true, tornBytes: 100, records: 1 });
  });

  // A SIGKILL stops a long write at a page boundary (a multiple of 4,096 bytes into the file): every such cut of our
  // own records leaves a partial record of 512, 1,024, 1,536 or 2,048 bytes whose key is whole.
  it.each([
    ['telemetry', 'bootstate-00000000-0000-0000-0000-000000000000|1|INFO|provision|x'],
    ['the report', 'PROVISIONING_REPORT'],
  ])('cuts a torn record of ours (%s, as a killed run leaves it at a page boundary) and writes after the whole ones', (_what, key) => {
    const file = path.join(dir, 'pool');
    const records = Array.from({ length: 9 }, (_, i) => rec(i === 8 ? key : `CLOUD_INIT|${i}`, 'v'));
    for (const pages of [1, 2, 3, 4]) {
      const whole = encodeRecords(records);
      const cutAt = pages * 4096 + 8 * RECORD_BYTES - (8 * RECORD_BYTES) % 4096;
      const bytes = Buffer.concat([encodeRecords(records.slice(0, 8)), whole.subarray(8 * RECORD_BYTES, Math.min(whole.length, cutAt))]);
      if (bytes.length % RECORD_BYTES === 0) continue;
      fs.writeFileSync(file, bytes);
      const torn = bytes.length % RECORD_BYTES;
      const store = new KvpStore({ path: file });
      store.append([rec('bootstate-x|2', 'next')]);
      expect(rawRecords(file)).toEqual([...records.slice(0, 8), rec('bootstate-x|2', 'next')]);
      expect(store.cutTornBytes).toBe(torn);
    }
  });

  it('still refuses a torn tail whose key is another writer\'s, and leaves it as it was', () => {
    const file = path.join(dir, 'pool');
    const bytes = encodeRecords([rec('a', '1'), rec('CLOUD_INIT|7', 'v')]).subarray(0, RECORD_BYTES + 1536);
    fs.writeFileSync(file, bytes);
    const store = new KvpStore({ path: file });
    expect(kvpError(() => store.append([rec('bootstate-x|1', 'v')])).message).toMatch(/is corrupt: 4096 bytes/);
    expect(kvpError(() => store.upsert('PROVISIONING_REPORT', 'v')).message).toMatch(/is corrupt/);
    expect(fs.readFileSync(file)).toEqual(bytes);
    expect(store.cutTornBytes).toBe(0);
  });

  it('with repair, reads skip the torn tail and the next write drops it', () => {
    const file = path.join(dir, 'pool');
    fill(file, [rec('a', '1')]);
    fs.appendFileSync(file, Buffer.alloc(100, 7));
    const store = new KvpStore({ path: file, repair: true });
    expect(store.dump()).toEqual([rec('a', '1')]);
    expect(fs.statSync(file).size).toBe(2660);
    store.append([rec('b', '2')]);
    expect(rawRecords(file)).toEqual([rec('a', '1'), rec('b', '2')]);
  });

  it('stops at 1,024 records: telemetry past the cap is dropped and counted', () => {
    const store = new KvpStore({ dir });
    store.append(Array.from({ length: MAX_RECORDS - 2 }, (_, i) => rec(`t${i}`, 'v')));
    expect(store.append([rec('x1', 'v'), rec('x2', 'v'), rec('x3', 'v'), rec('x4', 'v')])).toEqual({ written: 2, dropped: 2 });
    expect(store.append([rec('x5', 'v')])).toEqual({ written: 0, dropped: 1 });
    expect(store.droppedRecords).toBe(3);
    expect(fs.statSync(store.path).size).toBe(MAX_RECORDS * RECORD_BYTES);
  });

  it('still writes the report into a full pool by taking the slot of our oldest telemetry record', () => {
    const store = new KvpStore({ dir });
    const records = Array.from({ length: MAX_RECORDS }, (_, i) => rec(i < 10 ? `CLOUD_INIT|${i}` : `bootstate-0.1.0|vm|INFO|s|${i}`, 'v'));
    fill(store.path, records);
    expect(store.upsert('PROVISIONING_REPORT', 'result=error')).toMatchObject({ action: 'evicted', evictedKey: 'bootstate-0.1.0|vm|INFO|s|10' });
    const after = rawRecords(store.path);
    expect(after).toHaveLength(MAX_RECORDS);
    expect(after[10]).toEqual(rec('PROVISIONING_REPORT', 'result=error'));
    expect(after.slice(0, 10)).toEqual(records.slice(0, 10));
  });

  it('never evicts another writer: a full pool holding none of ours refuses the report and stays byte-identical', () => {
    const store = new KvpStore({ dir });
    fill(store.path, Array.from({ length: MAX_RECORDS }, (_, i) => rec(`other|${i}`, 'v')));
    const before = fs.readFileSync(store.path);
    expect(() => store.upsert('PROVISIONING_REPORT', 'r')).toThrow(/is full \(1024 records\) and holds no record of ours/);
    expect(fs.readFileSync(store.path).equals(before)).toBe(true);
  });

  it('refuses a pool that is a symlink, a hard link, a FIFO or a directory, without touching what it points at', () => {
    const victim = path.join(dir, 'victim');
    fs.writeFileSync(victim, 'precious');
    const pool = poolPath(dir, 1);
    const cases: Array<[string, () => void, RegExp]> = [
      ['symlink', () => fs.symlinkSync(victim, pool), /symlink/],
      ['hard link', () => fs.linkSync(victim, pool), /hard link \(2 names\)/],
      ['fifo', () => execFileSync('mkfifo', [pool]), /fifo/],
      ['directory', () => fs.mkdirSync(pool), /directory/],
    ];
    for (const [, plant, problem] of cases) {
      fs.rmSync(pool, { recursive: true, force: true });
      plant();
      const store = new KvpStore({ dir, pool: 1, timeoutMs: 200 });
      expect(() => store.upsert('PROVISIONING_REPORT', 'r')).toThrow(problem);
      expect(() => store.dump()).toThrow(problem);
      expect(fs.readFileSync(victim, 'utf8')).toBe('precious');
    }
  });

  it('treats a pool modified at or before boot as stale and one modified after boot as fresh', () => {
    const store = new KvpStore({ dir });
    store.append([rec('a', '1')]);
    const boot = new Date('2030-01-01T00:00:00Z');
    fs.utimesSync(store.path, boot, boot);
    expect(store.isStale(boot)).toBe(true);
    expect(store.isStale(new Date(boot.getTime() - 1000))).toBe(false);
    expect(new KvpStore({ dir: path.join(dir, 'none') }).isStale(boot)).toBe(false);
  });

  it('clearIfStale empties only a stale pool and reports whether it did', () => {
    const store = new KvpStore({ dir });
    store.append([rec('a', '1')]);
    const boot = new Date(Date.now() + 60_000);
    expect(store.clearIfStale(new Date(0))).toBe(false);
    expect(store.dump()).toHaveLength(1);
    expect(store.clearIfStale(boot)).toBe(true);
    expect(fs.statSync(store.path).size).toBe(0);
    expect(new KvpStore({ dir: path.join(dir, 'none') }).clearIfStale(boot)).toBe(false);
  });

  it('reads the boot time from the btime line of /proc/stat', () => {
    const stat = path.join(dir, 'stat');
    fs.writeFileSync(stat, 'cpu  1 2 3\nbtime 1754937941\nprocesses 12\n');
    expect(readBootTime(stat).toISOString()).toBe('2025-08-11T18:45:41.000Z');
    expect(readBootTime().getTime()).toBeLessThan(Date.now());
    fs.writeFileSync(stat, 'cpu 1\n');
    expect(() => readBootTime(stat)).toThrow(/no btime/);
  });

  it('describes the pool in info: size, mode, records, unique keys, stale and corrupt flags', () => {
    const store = new KvpStore({ dir });
    store.append([rec('a', '1'), rec('a', '2'), rec('b', '3')]);
    expect(store.info(new Date(0))).toEqual({
      path: store.path, exists: true, size: 3 * RECORD_BYTES, mode: '0600', records: 3, uniqueKeys: 2,
      maxRecords: 1024, stale: false, corrupt: false, tornBytes: 0,
    });
  });

  it('wraps file-system failures in a KVP error naming the pool', () => {
    fs.writeFileSync(path.join(dir, 'file'), '');
    const error = kvpError(() => new KvpStore({ dir: path.join(dir, 'file') }).append([rec('a', '1')]));
    expect(error.code).toBe('KVP_FAILED');
    expect(error.message).toContain(path.join(dir, 'file'));
  });
});
