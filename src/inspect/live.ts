/**
 * `--inspect ws://…`: streams a run to a Stately inspector. Entry point of its own, imported dynamically only
 * when `--inspect` is given, so a normal run never loads it. The inspector is fed synthetic events built from the
 * journal's allow-listed projection (machine definition without context, event types, state values, tags,
 * transitions, allow-listed output) — never XState's inspection events, whose snapshots carry context.
 */
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import type { AnyStateMachine, InspectionEvent } from 'xstate';
import { definitionOf } from './live-definition.js';
import { LiveSocket, type LiveSocketOptions } from './live-socket.js';
import { DEFAULT_ALLOW, recordMacrosteps, type AllowList, type MacrostepRecord } from './projection.js';

export { startInspectServer, type InspectServer, type InspectServerOptions } from './live-server.js';

export interface LiveInspector {
  inspect: (event: InspectionEvent) => void;
  /** Flushes, closes the socket and cancels retries; resolves within about a second whatever the server does. */
  stop(): Promise<void>;
}

export interface LiveInspectorOptions extends LiveSocketOptions {
  allow?: AllowList;
}

/** Starts streaming allow-listed inspection events of the root actor to the inspector WebSocket at `url`. */
export function startLiveInspector(url: string, options: LiveInspectorOptions = {}): LiveInspector {
  const socket = new LiveSocket(url, options);
  const inspector = createInspector({
    start: () => socket.start(),
    stop: () => {},
    send: (event: StatelyInspectionEvent) => socket.send(JSON.stringify(event)),
  });
  inspector.start();
  let sessionId: string | undefined;

  const forward = (step: MacrostepRecord): void => {
    if (!sessionId) return;
    const event = { type: step.event };
    inspector.event(sessionId, event);
    const snapshot: Record<string, unknown> = {
      status: step.status,
      value: step.value,
      context: {},
      tags: step.tags,
      transitions: step.transitions,
      seq: step.seq,
    };
    if (step.output) snapshot.output = step.output;
    if (step.timers) snapshot.timers = step.timers;
    inspector.snapshot(sessionId, snapshot, { event });
  };
  const record = recordMacrosteps(forward, options.allow ?? DEFAULT_ALLOW);

  return {
    inspect(event) {
      if (event.type === '@xstate.actor' && event.actorRef.sessionId === event.rootId && !sessionId) {
        sessionId = event.rootId;
        const logic = (event.actorRef as { logic?: AnyStateMachine }).logic;
        const definition = logic?.root ? definitionOf(logic.root) : { id: 'machine' };
        inspector.actor({ sessionId, send() {}, logic: { config: definition } } as never, { status: 'active', context: {} });
      }
      record(event);
    },
    stop: () => socket.close(),
  };
}
