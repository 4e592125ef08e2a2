/**
 * Observers never decide a run's outcome. The journal, the log file, stderr, KVP telemetry and the live
 * inspector are sinks: whatever one of them throws (ENOSPC, EROFS, EIO, EPIPE, a FIFO, a symlink, …) turns that
 * sink off, is counted, and is told once on the sinks that still work — the chart runs on and the report goes out.
 */

export interface SinkFailure {
  sink: string;
  error: string;
}

/** The sinks of one run: wraps each so its failures are contained, and remembers which ones were turned off. */
export class Sinks {
  readonly #off = new Map<string, string>();
  /** Writes that were lost because a sink failed or was already off. */
  lost = 0;
  #notify: ((failure: SinkFailure) => void) | null = null;
  #pending: SinkFailure[] = [];

  /** The sinks turned off so far, with the error that did it. */
  get off(): SinkFailure[] {
    return [...this.#off].map(([sink, error]) => ({ sink, error }));
  }

  /** Whether `sink` still works. */
  isOn(sink: string): boolean {
    return !this.#off.has(sink);
  }

  /**
   * Where a failure is told (the logger, once it exists). The call is deferred to a microtask so a failing
   * stream is never re-entered from its own write; failures seen before this is set are told when it is.
   */
  onFailure(notify: (failure: SinkFailure) => void): void {
    this.#notify = notify;
    for (const failure of this.#pending.splice(0)) this.#tell(failure);
  }

  /** Turns `sink` off because of `error` (the first error is kept); never throws. */
  fail(sink: string, error: unknown): void {
    this.lost += 1;
    if (this.#off.has(sink)) return;
    const failure = { sink, error: describe(error) };
    this.#off.set(sink, failure.error);
    if (this.#notify) this.#tell(failure);
    else this.#pending.push(failure);
  }

  /** `fn` as an observer of `sink`: after its first throw it is never called again. */
  observer<A extends unknown[]>(sink: string, fn: (...args: A) => void): (...args: A) => void {
    return (...args: A) => {
      if (this.#off.has(sink)) return;
      try {
        fn(...args);
      } catch (error) {
        this.fail(sink, error);
      }
    };
  }

  /** `stream` as a sink: writes that throw (or an `error` event, for emitters) turn it off. */
  stream<S extends { write(chunk: string): unknown }>(sink: string, stream: S): { write(chunk: string): void } {
    const emitter = stream as unknown as { on?(event: string, listener: (error: unknown) => void): unknown };
    if (typeof emitter.on === 'function') emitter.on('error', (error) => this.fail(sink, error));
    const write = this.observer(sink, (chunk: string) => void stream.write(chunk));
    return {
      write: (chunk: string) => {
        if (this.#off.has(sink)) this.lost += 1;
        else write(chunk);
      },
    };
  }

  #tell(failure: SinkFailure): void {
    const notify = this.#notify!;
    queueMicrotask(() => {
      try {
        notify(failure);
      } catch {
        // The sinks that are left could not take it either; the count in the summary still says so.
      }
    });
  }
}

function describe(error: unknown): string {
  const e = error as NodeJS.ErrnoException | undefined;
  const message = e?.message ?? String(error);
  return e?.code && !message.includes(e.code) ? `${e.code}: ${message}` : message;
}
