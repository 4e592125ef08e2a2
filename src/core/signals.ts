/**
 * Abort signals with a deadline, made without AbortSignal.any or AbortSignal.timeout: on Node 20 a signal made by
 * AbortSignal.any (over AbortSignal.timeout in particular) can be garbage-collected while a request or a wait
 * listens to it, and then never aborts — a deadline that silently stops being one. Here the caller's signal holds
 * the listener, the listener holds the controller, and the timer holds it too, so the signal lives as long as
 * anything can still abort it.
 */

export interface Deadline {
  /** Aborts with the caller's signal or once the time is up, whichever comes first. */
  signal: AbortSignal;
  /** The time ran out (rather than the caller's signal aborting). */
  timedOut: () => boolean;
  /** Drops the timer and the listener on the caller's signal. */
  clear: () => void;
}

/** A signal that aborts with `signal` (if any) or once `ms` have passed; `unref` lets the process exit meanwhile. */
export function withDeadline(signal: AbortSignal | undefined, ms: number, options: { unref?: boolean } = {}): Deadline {
  const controller = new AbortController();
  let expired = false;
  const abort = () => controller.abort();
  const timer = setTimeout(() => {
    expired = true;
    abort();
  }, ms);
  if (options.unref) timer.unref();
  signal?.addEventListener('abort', abort, { once: true });
  if (signal?.aborted) abort();
  return {
    signal: controller.signal,
    timedOut: () => expired,
    clear: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    },
  };
}
