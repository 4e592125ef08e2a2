/**
 * bootstate's telemetry in the guest pool: state spans and log events become KVP records keyed
 * `bootstate-<version>|<vm_id>|<LEVEL>|<name>|<uuid>` (docs/protocol.md#kvp-telemetry-keys), queued and written in batches under one lock
 * per flush, plus the `PROVISIONING_REPORT` written at once. Telemetry must never break provisioning, so no
 * method throws: failures are counted and the last one kept in `lastError`.
 */
import { randomUUID } from '../core/random.js';
import type { TelemetryConfig } from '../config/defaults.js';
import { DEFAULT_CONFIG } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import { VERSION } from '../core/version.js';
import { type KvpRecord, SAFE_KEY_BYTES, SAFE_VALUE_BYTES, sanitizeText, splitValue, truncateUtf8 } from './codec.js';
import { KvpStore, readBootTime, REPORT_KEY } from './store.js';
import { ZERO_VM_ID } from '../core/metadata.js';

export const KVP_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'] as const;
export type KvpLevel = (typeof KVP_LEVELS)[number];
export { REPORT_KEY };
const TRUNCATED = ' …[truncated]';

export interface KvpTelemetryOptions {
  /** `[telemetry]` settings; `kvp = false` makes every method a no-op. */
  config?: Partial<TelemetryConfig>;
  /** Shorthands for `config.kvp_dir`, `config.kvp_pool` and `config.kvp_level`; they win over `config`. */
  dir?: string;
  pool?: number;
  level?: string;
  /** The pool to write; default built from `config.kvp_dir` / `config.kvp_pool`. */
  store?: KvpStore;
  vmId?: string;
  /** Queued records that trigger a flush by themselves. Default 50. */
  batchSize?: number;
  /** Queued records kept while flushes fail; older ones beyond this are dropped. Default 1,024. */
  maxQueued?: number;
  /** Chunks one value may take (longer values are cut with a marker). Default 8. */
  maxChunks?: number;
  /** Boot time for the stale check at construction; `null` skips it. Default `/proc/stat` btime. */
  bootTime?: Date | null;
  /** Also flush on a timer (unref'd) so records reach the pool during long waits. Default off. */
  flushIntervalMs?: number;
  /** Told the first failed pool operation (the run's sinks turn telemetry off and say so once). */
  onFirstFailure?(message: string): void;
}

export interface KvpTelemetryStats {
  /** Records written to the pool. */
  written: number;
  /** Records below the configured level, never queued. */
  filtered: number;
  /** Records lost: pool full (1,024 records), queue overflow, or a failed flush that cannot be retried. */
  dropped: number;
  /** Failed pool operations (stale check, flush, report). */
  errors: number;
}

interface Pending {
  level: KvpLevel;
  name: string;
  value: string;
  id: string;
}

/** Returns the rank of a level (TRACE 0 … ERROR 4), accepting config spellings such as `warn`. */
export function levelRank(level: string): number {
  const rank = KVP_LEVELS.indexOf(level.toUpperCase() as KvpLevel);
  return rank < 0 ? KVP_LEVELS.indexOf('INFO') : rank;
}

/** Formats a Date as UTC ISO 8601 with milliseconds and `Z`, e.g. `2025-08-11T18:45:41.123Z`. */
export function isoMillis(time: Date): string {
  return time.toISOString();
}

/** Batches bootstate's telemetry into a KVP pool; see the file comment for the record format. */
export class KvpTelemetry {
  readonly enabled: boolean;
  readonly store: KvpStore;
  readonly stats: KvpTelemetryStats = { written: 0, filtered: 0, dropped: 0, errors: 0 };
  /** Message of the most recent failure, for logs and `bootstate kvp` support output. */
  lastError: string | undefined;
  /** Whether the last failure may succeed on retry (a lock held too long by another writer). */
  lastErrorRetryable = false;
  /** Whether the stale check (done by the first write) emptied the pool. */
  clearedStale = false;
  #vmId: string | undefined;
  #queue: Pending[] = [];
  /** Off after a failed flush, so a pool locked by a hung writer costs one lock timeout, not one per event. */
  #autoFlush = true;
  readonly #minRank: number;
  readonly #batchSize: number;
  readonly #maxQueued: number;
  readonly #maxChunks: number;
  readonly #onFirstFailure: ((message: string) => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Boot time for the stale check still owed by the first write; null once done or disabled. */
  #staleBefore: Date | null;

  constructor(options: KvpTelemetryOptions = {}) {
    const config = { ...DEFAULT_CONFIG.telemetry, ...options.config };
    const dir = options.dir ?? config.kvp_dir;
    const pool = options.pool ?? config.kvp_pool;
    this.enabled = config.kvp;
    this.store = options.store ?? new KvpStore({ dir, pool });
    this.#vmId = options.vmId;
    this.#minRank = levelRank(options.level ?? config.kvp_level);
    this.#batchSize = Math.max(1, options.batchSize ?? 50);
    this.#maxQueued = Math.max(1, options.maxQueued ?? 1024);
    this.#maxChunks = Math.max(1, options.maxChunks ?? 8);
    this.#onFirstFailure = options.onFirstFailure;
    // The stale check rides on the first write's lock rather than costing a lock of its own at start-up.
    this.#staleBefore = this.enabled && options.bootTime !== null ? (options.bootTime ?? readBootTime()) : null;
    if (this.enabled && options.flushIntervalMs) {
      this.#timer = setInterval(() => this.flush(), options.flushIntervalMs);
      this.#timer.unref();
    }
  }

  /** The level below which records are filtered out (from `kvp_level`). */
  get minLevel(): KvpLevel {
    return KVP_LEVELS[this.#minRank];
  }

  /** Records waiting for the next flush. */
  get pending(): number {
    return this.#queue.length;
  }

  /**
   * Sets the VM id used in keys. Keys are built at flush time, so records still queued when the id becomes known
   * carry it; only records already flushed keep the zero GUID.
   */
  setVmId(vmId: string): void {
    this.#vmId = vmId;
  }

  /** Queues one state span: `Start: <iso> | End: <iso> | Result: <result>` under the state path `name`. */
  stateSpan(name: string, span: { start: Date; end: Date; result: string; level?: KvpLevel }): void {
    const value = `Start: ${isoMillis(span.start)} | End: ${isoMillis(span.end)} | Result: ${span.result}`;
    this.#enqueue(span.level ?? 'INFO', name, value);
  }

  /** Queues one event: `Time: <iso> | Event: <message>`, time defaulting to now. */
  event(level: KvpLevel, name: string, message: string, time: Date = new Date()): void {
    this.#enqueue(level, name, `Time: ${isoMillis(time)} | Event: ${message}`);
  }

  /**
   * Writes the encoded provisioning report now, replacing any earlier one (upsert of `PROVISIONING_REPORT`).
   * Queued telemetry is flushed first so the pool reads in order. A report over 1,022 bytes is cut at a
   * character boundary, as the host would otherwise truncate it itself. Returns whether the report was written.
   */
  writeReport(encoded: string): boolean {
    if (!this.enabled) return false;
    const value = truncateUtf8(sanitizeText(encoded), SAFE_VALUE_BYTES);
    const batch = this.#queue;
    this.#queue = [];
    const records = batch.flatMap((pending) => this.#records(pending));
    const result = this.#attempt(() =>
      this.store.batch({ clearIfStaleBefore: this.#staleBefore ?? undefined, append: records, upsert: { key: REPORT_KEY, value } }),
    );
    if (!result) {
      this.#queue = batch.concat(this.#queue);
      return false;
    }
    this.#noteWritten(result.cleared, result.appended);
    return true;
  }

  /**
   * Writes every queued record under one exclusive lock; returns false if the pool write failed. A failure
   * keeps a retryable batch queued and pauses automatic flushing until an explicit flush succeeds.
   */
  flush(): boolean {
    if (!this.enabled || this.#queue.length === 0) return true;
    const batch = this.#queue;
    this.#queue = [];
    const records = batch.flatMap((pending) => this.#records(pending));
    const result = this.#attempt(() => this.store.batch({ clearIfStaleBefore: this.#staleBefore ?? undefined, append: records }));
    this.#autoFlush = result !== undefined;
    if (result) {
      this.#noteWritten(result.cleared, result.appended);
      return true;
    }
    const retryable = this.lastErrorRetryable;
    if (retryable) this.#queue = batch.concat(this.#queue);
    else this.stats.dropped += records.length;
    this.#trimQueue();
    return false;
  }

  /** Stops the flush timer and flushes what is queued. */
  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.flush();
  }

  #noteWritten(cleared: boolean, appended: { written: number; dropped: number }): void {
    if (cleared) this.clearedStale = true;
    this.#staleBefore = null;
    this.stats.written += appended.written;
    this.stats.dropped += appended.dropped;
  }

  #enqueue(level: KvpLevel, name: string, value: string): void {
    if (!this.enabled) return;
    if (levelRank(level) < this.#minRank) {
      this.stats.filtered++;
      return;
    }
    this.#queue.push({ level, name, value, id: randomUUID() });
    this.#trimQueue();
    if (this.#autoFlush && this.#queue.length >= this.#batchSize) this.flush();
  }

  #trimQueue(): void {
    const excess = this.#queue.length - this.#maxQueued;
    if (excess > 0) {
      this.#queue.splice(0, excess);
      this.stats.dropped += excess;
    }
  }

  /** Builds the key at flush time (current VM id) and splits the value into safe chunks sharing it. */
  #records(pending: Pending): KvpRecord[] {
    const head = `bootstate-${VERSION}|${this.#vmId ?? ZERO_VM_ID}|${pending.level}|`;
    const tail = `|${pending.id}`;
    const room = SAFE_KEY_BYTES - Buffer.byteLength(head + tail, 'utf8');
    const name = truncateUtf8(sanitizeText(pending.name).replace(/[|\u0000-\u001f\u007f]/g, '_'), Math.max(0, room));
    const key = head + (name || '_') + tail;
    let chunks = splitValue(sanitizeText(pending.value), SAFE_VALUE_BYTES);
    if (chunks.length > this.#maxChunks) {
      chunks = chunks.slice(0, this.#maxChunks);
      const last = chunks.length - 1;
      chunks[last] = truncateUtf8(chunks[last], SAFE_VALUE_BYTES - Buffer.byteLength(TRUNCATED)) + TRUNCATED;
    }
    return chunks.map((value) => ({ key, value }));
  }

  #attempt<T>(operation: () => T): T | undefined {
    try {
      return operation();
    } catch (error) {
      this.stats.errors++;
      this.lastError = error instanceof Error ? error.message : String(error);
      this.lastErrorRetryable = error instanceof BootstateError && error.retryable;
      if (this.stats.errors === 1) {
        try {
          this.#onFirstFailure?.(this.lastError);
        } catch {
          // Telemetry must never break provisioning, its failure listener included.
        }
      }
      return undefined;
    }
  }
}
