/**
 * The clocks a run reads, without Node's `performance` global: its first use loads perf_hooks, a couple of
 * milliseconds of CPU on every start. `process.uptime()` reads the same monotonic clock (libuv's hrtime) from the
 * process's start, with the same sub-millisecond precision.
 */

/** Milliseconds since this process started, monotonic: what `performance.now()` gives. */
export const sinceStartMs = (): number => process.uptime() * 1000;

/** The wall clock at this process's start, in ms since the epoch (to `Date.now()`'s millisecond). */
const origin = Date.now() - sinceStartMs();

/** The wall clock with sub-millisecond precision between two reads (`performance.timeOrigin + performance.now()`). */
export const preciseNow = (): number => origin + sinceStartMs();
