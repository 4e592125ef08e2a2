/**
 * The monitor statechart: the control flow of `bootstate monitor`, which keeps telling the fabric's health
 * store whether the host plugin and IMDS are reachable (docs/protocol.md#healthservice).
 *
 * One parallel region per signal loops `measuring` → `waiting` (`after` its period) → `measuring`. Each
 * measurement resolves with plain data (`ok`, `value`, and `at`, the clock reading when it finished), so the
 * chart stays pure: the failure streak is the `at` of its first failure, and a signal turns unhealthy only once
 * that streak is as old as its roll-up window. Every completed measurement sends exactly one observation to the
 * `reporter`, invoked on the root so it lives as long as the run; the reporter's client posts one observation
 * per POST and queues (at most ten) what arrives while a POST is in flight. STOP leaves `running`, which aborts
 * every measurement in flight, and `stopping` flushes the queue once before the final state.
 *
 * With `once` each region measures once and is done: the timer-started `bootstate monitor --once` runs one such cycle
 * a period, going on from the streaks (and the plugin's availability) the previous cycle left in its output.
 */
import { assign, enqueueActions, fromCallback, fromPromise, setup } from 'xstate';
import type { Observation } from '../src/azure/healthservice.js';
import type { MonitorConfig } from '../src/config/defaults.js';
import {
  HEARTBEAT,
  IMDS_HEARTBEAT,
  VERSIONS,
  type Measurement,
  type MonitorContext,
  type MonitorEvent,
  type MonitorInput,
  type MonitorOutput,
  type MonitorState,
  type ReporterEvent,
  type VersionsMeasurement,
} from './monitor-types.js';

export * from './monitor-types.js';

/** A period as a timer delay: never above 2^31−1 ms, where the runtime would fire at once and loop. */
const periodMs = (secs: number) => Math.min(2 ** 31 - 1, Math.max(1, Math.round(secs * 1000)));

/** Builds the chart input from configuration (seconds), the `--once` flag and what the previous run left. */
export function monitorInput(config: MonitorConfig, once: boolean, saved: MonitorState | null = null): MonitorInput {
  return {
    once,
    saved,
    heartbeatPeriodMs: periodMs(config.heartbeat_period_secs),
    versionsPeriodMs: periodMs(config.versions_period_secs),
    imdsPeriodMs: periodMs(config.imds_period_secs),
    heartbeatRollupMs: config.heartbeat_rollup_secs * 1000,
    imdsRollupMs: config.imds_rollup_secs * 1000,
  };
}

/**
 * Returns the streak start after one measurement: any success ends the streak, a failure starts one or
 * continues it.
 *
 * @example
 *   nextStreak(null, { ok: false, at: 60_000 })   // 60_000
 *   nextStreak(60_000, { ok: false, at: 120_000 }) // 60_000
 *   nextStreak(60_000, { ok: true, at: 180_000 })  // null
 */
export function nextStreak(streakStart: number | null, measurement: Pick<Measurement, 'ok' | 'at'>): number | null {
  if (measurement.ok) return null;
  return streakStart ?? measurement.at;
}

/**
 * Whether a signal counts as unhealthy at `now`: only once its failure streak began at least `rollupMs` ago.
 *
 * @example
 *   isUnhealthy(60_000, 300_000, 300_000) // false: 4 minutes of failures
 *   isUnhealthy(60_000, 360_000, 300_000) // true: 5 minutes
 */
export function isUnhealthy(streakStart: number | null, now: number, rollupMs: number): boolean {
  return streakStart !== null && now - streakStart >= rollupMs;
}

/** Builds the observation for a rolled-up signal from the streak after the measurement. */
export function rolledUpObservation(
  name: string,
  streakStart: number | null,
  measurement: Measurement,
  rollupMs: number,
  value: string,
): Observation {
  return { ObservationName: name, IsHealthy: !isUnhealthy(streakStart, measurement.at, rollupMs), Description: '', Value: value };
}

/** Builds the `/versions` observation: no roll-up, sent as measured. */
export function versionsObservation(measurement: VersionsMeasurement): Observation {
  return { ObservationName: VERSIONS, IsHealthy: measurement.ok, Description: '', Value: measurement.value };
}

/** A placeholder the runner replaces with `provide`; the chart itself never performs I/O. */
const notProvided = <T>(name: string) =>
  fromPromise<T>(async () => {
    throw new Error(`actor ${name} was not provided`);
  });

export const monitorMachine = setup({
  types: {
    context: {} as MonitorContext,
    input: {} as MonitorInput,
    events: {} as MonitorEvent,
    output: {} as MonitorOutput,
  },
  actors: {
    checkHeartbeat: notProvided<Measurement>('checkHeartbeat'),
    checkVersions: notProvided<VersionsMeasurement>('checkVersions'),
    checkImds: notProvided<Measurement>('checkImds'),
    reporter: fromCallback<ReporterEvent>(() => undefined),
    flush: notProvided<void>('flush'),
  },
  guards: {
    once: ({ context }) => context.once,
    versionsKnownAvailable: ({ context }) => context.versionsAvailable,
    versionsAvailable: (_, measurement: VersionsMeasurement) => measurement.available,
  },
  delays: {
    heartbeatPeriod: ({ context }) => context.heartbeatPeriodMs,
    versionsPeriod: ({ context }) => context.versionsPeriodMs,
    imdsPeriod: ({ context }) => context.imdsPeriodMs,
  },
  actions: {
    observeHeartbeat: enqueueActions(({ context, enqueue }, measurement: Measurement) => {
      const streak = nextStreak(context.heartbeatStreak, measurement);
      enqueue.assign({ heartbeatStreak: streak });
      const observation = rolledUpObservation(HEARTBEAT, streak, measurement, context.heartbeatRollupMs, '');
      enqueue.sendTo('reporter', { type: 'OBSERVE', observation } satisfies ReporterEvent);
    }),
    observeVersions: enqueueActions(({ enqueue }, measurement: VersionsMeasurement) => {
      enqueue.assign({ versionsAvailable: measurement.available });
      enqueue.sendTo('reporter', { type: 'OBSERVE', observation: versionsObservation(measurement) } satisfies ReporterEvent);
    }),
    observeImds: enqueueActions(({ context, enqueue }, measurement: Measurement) => {
      const streak = nextStreak(context.imdsStreak, measurement);
      enqueue.assign({ imdsStreak: streak });
      const observation = rolledUpObservation(IMDS_HEARTBEAT, streak, measurement, context.imdsRollupMs, measurement.value);
      enqueue.sendTo('reporter', { type: 'OBSERVE', observation } satisfies ReporterEvent);
    }),
    noteStop: assign({ stopRequested: true }),
    noteReporterFailed: assign({ reporterFailed: true }),
  },
}).createMachine({
  id: 'monitor',
  context: ({ input: { saved, ...input } }) => ({
    ...input,
    heartbeatStreak: saved?.heartbeatStreak ?? null,
    imdsStreak: saved?.imdsStreak ?? null,
    versionsAvailable: saved?.versionsAvailable ?? false,
    stopRequested: false,
    reporterFailed: false,
  }),
  invoke: { id: 'reporter', src: 'reporter', onError: { target: '.stopped', actions: 'noteReporterFailed' } },
  initial: 'running',
  states: {
    running: {
      type: 'parallel',
      on: { STOP: { target: 'stopping', actions: 'noteStop' } },
      onDone: 'stopping',
      states: {
        heartbeat: {
          initial: 'measuring',
          states: {
            measuring: {
              invoke: {
                id: 'checkHeartbeat',
                src: 'checkHeartbeat',
                onDone: [
                  { guard: 'once', target: 'done', actions: { type: 'observeHeartbeat', params: ({ event }) => event.output } },
                  { target: 'waiting', actions: { type: 'observeHeartbeat', params: ({ event }) => event.output } },
                ],
                // Actors classify every answer, so a rejection is a bug: skip the cycle, keep the streak.
                onError: [{ guard: 'once', target: 'done' }, { target: 'waiting' }],
              },
            },
            waiting: { after: { heartbeatPeriod: 'measuring' } },
            done: { type: 'final' },
          },
        },
        versions: {
          initial: 'starting',
          states: {
            // A run that goes on from one which found the plugin usable does not ask again.
            starting: { always: [{ guard: 'versionsKnownAvailable', target: 'done' }, { target: 'measuring' }] },
            measuring: {
              invoke: {
                id: 'checkVersions',
                src: 'checkVersions',
                onDone: [
                  { guard: 'once', target: 'done', actions: { type: 'observeVersions', params: ({ event }) => event.output } },
                  {
                    guard: { type: 'versionsAvailable', params: ({ event }) => event.output },
                    target: 'done',
                    actions: { type: 'observeVersions', params: ({ event }) => event.output },
                  },
                  { target: 'waiting', actions: { type: 'observeVersions', params: ({ event }) => event.output } },
                ],
                onError: [{ guard: 'once', target: 'done' }, { target: 'waiting' }],
              },
            },
            // The plugin is re-checked only until it is available, as waagent re-initialises it.
            waiting: { after: { versionsPeriod: 'measuring' } },
            done: { type: 'final' },
          },
        },
        imds: {
          initial: 'measuring',
          states: {
            measuring: {
              invoke: {
                id: 'checkImds',
                src: 'checkImds',
                onDone: [
                  { guard: 'once', target: 'done', actions: { type: 'observeImds', params: ({ event }) => event.output } },
                  { target: 'waiting', actions: { type: 'observeImds', params: ({ event }) => event.output } },
                ],
                onError: [{ guard: 'once', target: 'done' }, { target: 'waiting' }],
              },
            },
            waiting: { after: { imdsPeriod: 'measuring' } },
            done: { type: 'final' },
          },
        },
      },
    },
    stopping: {
      invoke: { id: 'flush', src: 'flush', onDone: 'stopped', onError: 'stopped' },
    },
    stopped: { type: 'final' },
  },
  output: ({ context }): MonitorOutput => {
    const state = { heartbeatStreak: context.heartbeatStreak, imdsStreak: context.imdsStreak, versionsAvailable: context.versionsAvailable };
    if (context.reporterFailed) return { result: 'failed', exitCode: 1, state };
    return { result: context.stopRequested ? 'stopped' : 'completed', exitCode: 0, state };
  },
});

