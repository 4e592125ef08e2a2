/**
 * What `bootstate report <health>` must do, from the protocol (docs/protocol.md#health-reports), not from
 * machines/report.ts:
 * POST the report; a retryable failure waits the retry interval and POSTs again; anything else ends it refused;
 * the total deadline ends it whatever is in flight, as "operation timed out" carrying the last failure's reason;
 * an accepted POST ends it accepted, whatever failed before.
 */
import { toFailure, type ErrorCode } from '../../src/core/errors.js';

export interface SeenReportOutput {
  accepted: boolean;
  code: ErrorCode | null;
  lastError: string | null;
}

export class ReportOracle {
  now = 0;
  posts = 0;
  output: SeenReportOutput | null = null;
  private inFlight = true;
  private retryAt: number | null = null;
  private lastError: string | null = null;

  constructor(
    private readonly retryIntervalMs: number,
    private readonly totalTimeoutMs: number,
  ) {
    this.posts = 1;
  }

  get posting(): boolean {
    return this.output === null && this.inFlight;
  }

  /** When the next retry or the deadline falls due. */
  get nextDue(): number | null {
    if (this.output) return null;
    return Math.min(this.totalTimeoutMs, this.retryAt ?? Infinity);
  }

  accepted(): void {
    this.expectPosting();
    this.output = { accepted: true, code: null, lastError: null };
  }

  failed(error: unknown): void {
    this.expectPosting();
    const f = toFailure(error);
    this.inFlight = false;
    if (!f.retryable) {
      this.output = { accepted: false, code: f.code, lastError: null };
      return;
    }
    this.lastError = f.reason;
    this.retryAt = this.now + this.retryIntervalMs;
  }

  advanceTo(to: number): void {
    while (this.output === null) {
      const due = this.nextDue!;
      if (due > to) break;
      this.now = due;
      if (due >= this.totalTimeoutMs) this.output = { accepted: false, code: 'TIMEOUT', lastError: this.lastError };
      else {
        this.retryAt = null;
        this.inFlight = true;
        this.posts++;
      }
    }
    this.now = to;
  }

  key(): string {
    return JSON.stringify({ now: this.now, inFlight: this.inFlight, retryAt: this.retryAt, last: this.lastError !== null, output: this.output });
  }

  clone(): ReportOracle {
    return Object.assign(Object.create(ReportOracle.prototype), structuredClone({ ...this })) as ReportOracle;
  }

  private expectPosting() {
    if (!this.posting) throw new Error('oracle: a POST finished, but none is in flight');
  }
}
