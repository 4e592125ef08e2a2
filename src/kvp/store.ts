/**
 * One KVP pool file, shared with other writers (cloud-init, azure-init, hv_kvp_daemon). Every read runs under
 * a shared `flock`, every write under an exclusive one, and the file is only ever changed in place: other
 * writers keep their own descriptors open, so replacing it by rename would split the pool in two.
 */
import fs from 'node:fs';
import path from 'node:path';
import { BootstateError } from '../core/errors.js';
import {
  type CodecOptions,
  type KvpRecord,
  KEY_FIELD_BYTES,
  MAX_RECORDS,
  RECORD_BYTES,
  checkField,
  decodeRecords,
  encodeRecord,
  encodeRecords,
  limits,
  validateRecord,
} from './codec.js';
import { readBytes, wrapIo, writeFully } from './file-io.js';
import { type LockMode, type LockOptions, lockFd } from '../system/flock.js';
import { openRegularSync } from '../system/open-regular.js';

export const DEFAULT_KVP_DIR = '/var/lib/hyperv';
export const GUEST_POOL = 1;
/** Key prefix of bootstate's own telemetry: the records a full pool gives up for the provisioning report. */
export const OWN_KEY_PREFIX = 'bootstate-';
/** Key of the outcome record (azure-init's and cloud-init's too). */
export const REPORT_KEY = 'PROVISIONING_REPORT';

export interface KvpStoreOptions extends CodecOptions, LockOptions {
  /** The pool file; overrides `dir` and `pool`. */
  path?: string;
  /** Pool directory, default `/var/lib/hyperv`. */
  dir?: string;
  /** Pool number, default 1 (the guest → host pool `.kvp_pool_1`). */
  pool?: number;
  /** Drop a torn tail (size not a multiple of 2,560) instead of refusing the file. */
  repair?: boolean;
  /** Decode invalid UTF-8 as U+FFFD instead of failing. */
  lossy?: boolean;
  /** Records whose key starts with this are the first evicted when the report must fit a full pool. */
  ownPrefix?: string;
}

export interface AppendResult {
  written: number;
  dropped: number;
}

export interface UpsertResult {
  /** `replaced` (an existing slot was overwritten), `appended`, or `evicted` (took another record's slot). */
  action: 'replaced' | 'appended' | 'evicted';
  /** The key whose record was given up, when `action` is `evicted`. */
  evictedKey?: string;
  /** How many later duplicates of the key were removed. */
  removedDuplicates: number;
}

export interface KvpInfo {
  path: string;
  exists: boolean;
  size: number;
  /** File mode as octal text, e.g. `0600`. */
  mode?: string;
  records: number;
  uniqueKeys: number;
  maxRecords: number;
  stale: boolean;
  corrupt: boolean;
  /** Bytes past the last whole record (non-zero only when corrupt). */
  tornBytes: number;
}

/** Returns the pool file path for a directory and pool number, e.g. `/var/lib/hyperv/.kvp_pool_1`. */
export function poolPath(dir = DEFAULT_KVP_DIR, pool = GUEST_POOL): string {
  if (!Number.isInteger(pool) || pool < 0 || pool > 4) {
    throw new BootstateError('KVP_FAILED', `kvp pool must be an integer 0..4, got ${pool}`);
  }
  return path.join(dir, `.kvp_pool_${pool}`);
}

/** Reads the kernel's boot time (`btime` of `/proc/stat`, whole seconds) as a Date. */
export function readBootTime(statFile = '/proc/stat'): Date {
  const text = fs.readFileSync(statFile, 'utf8');
  const match = /^btime\s+(\d+)\s*$/m.exec(text);
  if (!match) throw new BootstateError('KVP_FAILED', `no btime line in ${statFile}`);
  return new Date(Number(match[1]) * 1000);
}

const { O_RDONLY, O_RDWR, O_APPEND, O_CREAT } = fs.constants;

export class KvpStore {
  readonly path: string;
  /** Records refused because the pool already held 1,024 records. */
  droppedRecords = 0;
  /** Bytes of a torn record of ours (a killed run's partial write) cut from the end of the file. */
  cutTornBytes = 0;
  readonly #options: KvpStoreOptions;

  constructor(options: KvpStoreOptions = {}) {
    this.path = options.path ?? poolPath(options.dir, options.pool);
    this.#options = options;
  }

  /** Appends records in order under one lock; past 1,024 records in the file the rest are dropped and counted. */
  append(records: readonly KvpRecord[]): AppendResult {
    for (const record of records) validateRecord(record, this.#options);
    if (records.length === 0) return { written: 0, dropped: 0 };
    return this.#locked('exclusive', O_RDWR | O_APPEND | O_CREAT, 'append to', (fd) => this.#appendIn(fd, records));
  }

  /**
   * Several changes under ONE exclusive lock, in this order: empty the pool if it predates `clearIfStaleBefore`,
   * append `append`, upsert `upsert`. The agent's writes go through here so each costs a single lock.
   */
  batch(changes: { clearIfStaleBefore?: Date; append?: readonly KvpRecord[]; upsert?: KvpRecord }): {
    cleared: boolean;
    appended: AppendResult;
    upserted: UpsertResult | null;
  } {
    const append = changes.append ?? [];
    for (const record of append) validateRecord(record, this.#options);
    if (changes.upsert) validateRecord(changes.upsert, this.#options);
    return this.#locked('exclusive', O_RDWR | O_CREAT, 'write to', (fd) => {
      const cleared = changes.clearIfStaleBefore ? this.#clearIfStaleIn(fd, changes.clearIfStaleBefore) : false;
      const appended = append.length > 0 ? this.#appendIn(fd, append) : { written: 0, dropped: 0 };
      const upserted = changes.upsert ? this.#upsertIn(fd, changes.upsert.key, changes.upsert.value) : null;
      return { cleared, appended, upserted };
    });
  }

  /**
   * Appends what `build` makes of the room left, under one exclusive lock: `build` is told how many records the pool
   * can still take (1,024 minus those already there) and must return no more, so a set of records that only make
   * sense together is written whole or cut by its maker, never cut by the cap.
   */
  appendFitting(build: (room: number) => readonly KvpRecord[]): AppendResult & { room: number } {
    return this.#locked('exclusive', O_RDWR | O_APPEND | O_CREAT, 'append to', (fd) => {
      const room = Math.max(0, MAX_RECORDS - this.#wholeRecords(fd, true) / RECORD_BYTES);
      const records = build(room);
      for (const record of records) validateRecord(record, this.#options);
      if (records.length > room) throw new RangeError(`${records.length} records built for a room of ${room}`);
      return { ...(records.length > 0 ? this.#appendIn(fd, records) : { written: 0, dropped: 0 }), room };
    });
  }

  #appendIn(fd: number, records: readonly KvpRecord[]): AppendResult {
    const count = this.#wholeRecords(fd, true) / RECORD_BYTES;
    const room = Math.max(0, MAX_RECORDS - count);
    const kept = records.slice(0, room);
    const dropped = records.length - kept.length;
    this.droppedRecords += dropped;
    if (kept.length > 0) {
      // Written at the end of the whole records (with O_APPEND, at the end whatever a non-flock writer did); on a
      // failed or short write the file is cut back so no torn record is left behind.
      const before = count * RECORD_BYTES;
      try {
        writeFully(fd, encodeRecords(kept, this.#options), before);
      } catch (error) {
        fs.ftruncateSync(fd, before);
        throw error;
      }
    }
    return { written: kept.length, dropped };
  }

  /**
   * Sets `key` to `value` once: overwrites its first record in place, removes later duplicates, or adds it. In a
   * full pool it replaces our oldest telemetry record; with none of ours there it throws KVP_FAILED.
   */
  upsert(key: string, value: string): UpsertResult {
    validateRecord({ key, value }, this.#options);
    return this.#locked('exclusive', O_RDWR | O_CREAT, 'write to', (fd) => this.#upsertIn(fd, key, value));
  }

  #upsertIn(fd: number, key: string, value: string): UpsertResult {
    const { raw, records } = this.#readRaw(fd, true);
    const encoded = encodeRecord({ key, value }, this.#options);
    let target = records.findIndex((r) => r.key === key);
    let result: UpsertResult;
    if (target >= 0 && target < MAX_RECORDS) {
      result = { action: 'replaced', removedDuplicates: 0 };
    } else if (records.length < MAX_RECORDS) {
      target = records.length;
      result = { action: 'appended', removedDuplicates: 0 };
    } else {
      // A full pool must still carry the outcome, but never at another writer's expense: the report takes the
      // slot of our oldest telemetry record, and when the pool holds none of ours it is not written here.
      const prefix = this.#options.ownPrefix ?? OWN_KEY_PREFIX;
      target = records.findIndex((r, i) => i < MAX_RECORDS && r.key.startsWith(prefix));
      if (target < 0) {
        const message = `kvp pool ${this.path} is full (${records.length} records) and holds no record of ours to replace; other writers' records are never evicted`;
        throw new BootstateError('KVP_FAILED', message, { data: [['error', message], ['path', this.path], ['records', String(records.length)]] });
      }
      result = { action: 'evicted', evictedKey: records[target].key, removedDuplicates: 0 };
    }
    writeFully(fd, encoded, target * RECORD_BYTES);
    const keep = indexes(records.length).filter((i) => i === target || records[i].key !== key);
    result.removedDuplicates = records.length - keep.length;
    if (keep.length < records.length) {
      if (target < records.length) encoded.copy(raw, target * RECORD_BYTES);
      this.#compact(fd, raw, keep);
    }
    return result;
  }

  /** Returns the value of the last record with `key`, or undefined. */
  read(key: string): string | undefined {
    let found: string | undefined;
    for (const record of this.dump()) if (record.key === key) found = record.value;
    return found;
  }

  /** Returns every key with its last value, in first-seen order. */
  entries(): Map<string, string> {
    const map = new Map<string, string>();
    for (const record of this.dump()) map.set(record.key, record.value);
    return map;
  }

  /** Returns every record in file order, duplicates included; a missing file is empty. */
  dump(): KvpRecord[] {
    return this.#lockedIfExists('shared', O_RDONLY, 'read', (fd) => this.#readAll(fd, false)) ?? [];
  }

  /** Removes every record with `key` (order of the rest kept) and returns how many were removed. */
  delete(key: string): number {
    checkField(key, 'key', limits({ unsafe: true }).key);
    const removed = this.#lockedIfExists('exclusive', O_RDWR, 'delete from', (fd) => {
      const { raw, records } = this.#readRaw(fd, true);
      const keep = indexes(records.length).filter((i) => records[i].key !== key);
      if (keep.length !== records.length) this.#compact(fd, raw, keep);
      return records.length - keep.length;
    });
    return removed ?? 0;
  }

  /** Empties the pool file (creating it, mode 0600, if missing). */
  clear(): void {
    this.#locked('exclusive', O_RDWR | O_CREAT, 'clear', (fd) => fs.ftruncateSync(fd, 0));
  }

  /** Whether the pool file predates `bootTime` (mtime <= boot time); a missing file is not stale. */
  isStale(bootTime: Date = readBootTime()): boolean {
    try {
      return fs.statSync(this.path).mtimeMs <= bootTime.getTime();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw wrapIo(error, 'stat', this.path);
    }
  }

  /** Empties the pool under the exclusive lock if it predates `bootTime`; returns whether it did. */
  clearIfStale(bootTime: Date = readBootTime()): boolean {
    const cleared = this.#lockedIfExists('exclusive', O_RDWR, 'clear', (fd) => this.#clearIfStaleIn(fd, bootTime));
    return cleared ?? false;
  }

  #clearIfStaleIn(fd: number, bootTime: Date): boolean {
    const stat = fs.fstatSync(fd);
    if (stat.size === 0 || stat.mtimeMs > bootTime.getTime()) return false;
    fs.ftruncateSync(fd, 0);
    return true;
  }

  /** Describes the pool without failing on corruption: size, records, unique keys, stale and corrupt flags. */
  info(bootTime?: Date): KvpInfo {
    const base: KvpInfo = {
      path: this.path, exists: false, size: 0, records: 0, uniqueKeys: 0,
      maxRecords: MAX_RECORDS, stale: false, corrupt: false, tornBytes: 0,
    };
    const found = this.#lockedIfExists('shared', O_RDONLY, 'read', (fd) => {
      const stat = fs.fstatSync(fd);
      const tornBytes = stat.size % RECORD_BYTES;
      const records = decodeRecords(readBytes(fd, stat.size - tornBytes), { lossy: true });
      return {
        ...base, exists: true, size: stat.size, mode: `0${(stat.mode & 0o777).toString(8)}`,
        records: records.length, uniqueKeys: new Set(records.map((r) => r.key)).size,
        stale: stat.mtimeMs <= (bootTime ?? readBootTime()).getTime(), corrupt: tornBytes !== 0, tornBytes,
      };
    });
    return found ?? base;
  }

  /** Size of the whole records in the file; refuses a torn file unless repairing (cutting it when `mayCut`). */
  #wholeRecords(fd: number, mayCut: boolean): number {
    const size = fs.fstatSync(fd).size;
    const torn = size % RECORD_BYTES;
    if (torn === 0) return size;
    // A SIGKILL can stop a write at a page boundary: a partial record whose key is one this agent writes is what a
    // killed run of ours left, under the lock, and nothing can read it. Anything else is refused, byte for byte.
    if (!this.#options.repair && !this.#tornTailIsOurs(fd, size, torn)) {
      const message = `kvp pool ${this.path} is corrupt: ${size} bytes is not a multiple of ${RECORD_BYTES} (use repair to drop the last ${torn} bytes)`;
      throw new BootstateError('KVP_FAILED', message, {
        data: [['error', message], ['path', this.path], ['size', String(size)]],
      });
    }
    if (mayCut) {
      fs.ftruncateSync(fd, size - torn);
      if (!this.#options.repair) this.cutTornBytes += torn;
    }
    return size - torn;
  }

  /** Whether the `torn` bytes at the end of the file begin a record with our report key or our telemetry prefix. */
  #tornTailIsOurs(fd: number, size: number, torn: number): boolean {
    const head = Buffer.alloc(Math.min(torn, KEY_FIELD_BYTES));
    const n = fs.readSync(fd, head, 0, head.length, size - torn);
    const nul = head.subarray(0, n).indexOf(0);
    const key = head.subarray(0, nul < 0 ? n : nul).toString('latin1');
    const whole = nul >= 0;
    const own = this.#options.ownPrefix ?? OWN_KEY_PREFIX;
    return (key.startsWith(own) && key.length > own.length) || (whole ? key === REPORT_KEY : key.length >= own.length && REPORT_KEY.startsWith(key));
  }

  #readAll(fd: number, mayCut: boolean): KvpRecord[] {
    return this.#readRaw(fd, mayCut).records;
  }

  /**
   * Rewrites (`mayCut`) decode leniently: they only compare keys and copy slots byte for byte, and one foreign
   * record with a character cut in half (azure-init splits values by bytes) must not block the report.
   */
  #readRaw(fd: number, mayCut: boolean): { raw: Buffer; records: KvpRecord[] } {
    const raw = readBytes(fd, this.#wholeRecords(fd, mayCut));
    return { raw, records: decodeRecords(raw, { lossy: mayCut || this.#options.lossy }) };
  }

  /** Keeps only the slots in `keep` (ascending indexes), copying their bytes unchanged, with one write and a cut. */
  #compact(fd: number, raw: Buffer, keep: readonly number[]): void {
    let first = 0;
    while (first < keep.length && keep[first] === first) first++;
    const tail = Buffer.concat(keep.slice(first).map((i) => raw.subarray(i * RECORD_BYTES, (i + 1) * RECORD_BYTES)));
    if (tail.length > 0) writeFully(fd, tail, first * RECORD_BYTES);
    fs.ftruncateSync(fd, keep.length * RECORD_BYTES);
  }

  #locked<T>(mode: LockMode, flags: number, what: string, fn: (fd: number) => T): T {
    if (flags & O_CREAT) {
      try {
        fs.mkdirSync(path.dirname(this.path), { recursive: true, mode: 0o755 });
      } catch (error) {
        throw wrapIo(error, what, this.path);
      }
    }
    let fd: number;
    try {
      fd = openRegularSync(this.path, { flags });
    } catch (error) {
      throw wrapIo(error, what, this.path);
    }
    try {
      lockFd(fd, mode, this.#options);
      return fn(fd);
    } catch (error) {
      throw wrapIo(error, what, this.path);
    } finally {
      fs.closeSync(fd); // releases the flock: no other reference to this open file description remains
    }
  }

  #lockedIfExists<T>(mode: LockMode, flags: number, what: string, fn: (fd: number) => T): T | undefined {
    try {
      return this.#locked(mode, flags, what, fn);
    } catch (error) {
      if (error instanceof BootstateError && error.data.some(([k, v]) => k === 'errno' && v === 'ENOENT')) return undefined;
      throw error;
    }
  }
}

function indexes(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}
