/**
 * The chart on the console, for a dry run and the demo: each leaf state of the root actor as it is entered, with its
 * tags and the time since the run started.
 */
import type { InspectionEvent, StateValue } from 'xstate';
import { leafPaths } from '../core/state-path.js';
import { sinceStartMs } from '../core/clock.js';

/** An inspect observer that prints each leaf state of the root actor when it is entered. */
export function statePrinter(out: (line: string) => void): (event: InspectionEvent) => void {
  const started = sinceStartMs();
  let previous = new Set<string>();
  let rootSession: string | null = null;
  return (event) => {
    if (event.type !== '@xstate.snapshot') return;
    rootSession ??= event.rootId;
    if (event.actorRef.sessionId !== rootSession) return;
    const snapshot = event.snapshot as unknown as { value: StateValue; tags?: Set<string> };
    const now = new Set(leafPaths(snapshot.value));
    for (const leaf of now) {
      if (previous.has(leaf)) continue;
      const tags = [...(snapshot.tags ?? [])].join(' ');
      out(`${(sinceStartMs() - started).toFixed(1).padStart(8)} ms  ${leaf}${tags ? `  [${tags}]` : ''}`);
    }
    previous = now;
  };
}
