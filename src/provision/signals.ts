/** The terminating signals of a run: caught from its first moment, delivered to its chart once the chart exists. */
/** Signals that end a run the same way: the failure report within the short budget, unless Ready is pending. */
export const TERMINATING_SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];

/** Terminating signals caught for a run, from before its chart exists until it has ended. */
export interface CaughtSignals {
  /** From now on each signal calls `terminate`; one caught before this calls it at once. */
  deliverTo(terminate: () => void): void;
  /** Restores the default handling (idempotent). */
  stop(): void;
}

/**
 * Catches TERMINATING_SIGNALS from the start of a run, so that a signal while the agent is still loading (systemd
 * stopping the unit in its first tenth of a second) ends it with a failure report like one a moment later would,
 * instead of killing it silently.
 */
export function catchSignals(): CaughtSignals {
  let caught = false;
  let terminate: (() => void) | null = null;
  const onSignal = () => (terminate ? terminate() : (caught = true));
  for (const signal of TERMINATING_SIGNALS) process.on(signal, onSignal);
  return {
    deliverTo(fn) {
      terminate = fn;
      if (caught) fn();
    },
    stop() {
      for (const signal of TERMINATING_SIGNALS) process.off(signal, onSignal);
    },
  };
}
