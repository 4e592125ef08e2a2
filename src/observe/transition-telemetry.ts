/**
 * Turns the root actor's snapshots into KVP telemetry: one record per state left, with its start, end and the
 * type of the event that ended it. Only state paths and event types are used — never context or payloads.
 */
import type { InspectionEvent, StateValue } from 'xstate';
import { activePaths } from '../core/state-path.js';
import type { KvpTelemetry } from '../kvp/telemetry.js';

export class TransitionTelemetry {
  #active = new Map<string, Date>();

  constructor(private readonly kvp: KvpTelemetry, private readonly now: () => Date = () => new Date()) {}

  /** An XState `inspect` observer. */
  inspect(event: InspectionEvent): void {
    if (event.type !== '@xstate.snapshot') return;
    const isRoot = event.actorRef.sessionId === event.rootId;
    if (!isRoot) return;
    const snapshot = event.snapshot as { value?: StateValue; status?: string };
    if (snapshot.value === undefined) return;
    const now = this.now();
    const current = new Set(activePaths(snapshot.value));
    for (const [path, start] of this.#active) {
      if (!current.has(path)) {
        this.kvp.stateSpan(path, { start, end: now, result: event.event.type });
        this.#active.delete(path);
      }
    }
    for (const path of current) if (!this.#active.has(path)) this.#active.set(path, now);
    if (snapshot.status === 'done') this.flush('final');
  }

  /** Closes every state still active (the final state) so its span is recorded before exit. */
  flush(result = 'final'): void {
    const now = this.now();
    for (const [path, start] of this.#active) this.kvp.stateSpan(path, { start, end: now, result });
    this.#active.clear();
  }
}
