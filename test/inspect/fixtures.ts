/**
 * Small machines with the features of the real charts (compound and parallel states, tags, final states with
 * output, invokes with onDone/onError, named `after` delays, guards, `always`), and a secret planted in context,
 * event payloads, actor results and output so that every renderer and sink can be scanned for it.
 */
import { assign, createActor, fromPromise, setup, toPromise, type AnyStateMachine, type InspectionEvent } from 'xstate';

export const SECRET = 'S3cr3t-Pa55w0rd-9f1c7e';

export interface FixtureOptions {
  /** How many metadata requests fail before one succeeds. */
  failures: number;
  /** Whether the metadata request ever succeeds. */
  imdsUp?: boolean;
}

/** A first-boot-shaped machine: marker check, a parallel region of report ‖ metadata with retries, then Ready. */
export function fixtureMachine(options: FixtureOptions) {
  let calls = 0;
  return setup({
    types: {} as {
      context: { attempts: number; password: string; metadata: unknown };
      events: { type: 'TERMINATE'; password: string } | { type: 'NUDGE'; token: string };
      output: { result: string; exitCode: number; reason?: string; password: string };
    },
    actors: {
      checkMarker: fromPromise(async () => ({ found: false, secret: SECRET })),
      reportInProgress: fromPromise(async () => 'accepted'),
      fetchMetadata: fromPromise(async () => {
        calls++;
        if (options.imdsUp === false || calls <= options.failures) throw new Error(`imds down, password=${SECRET}`);
        return { adminPassword: SECRET };
      }),
      reportReady: fromPromise(async () => 'accepted'),
    },
    delays: { retryInterval: 5, totalDeadline: 2000 },
    guards: { canRetry: ({ context }) => context.attempts < 3 },
  }).createMachine({
    id: 'firstboot',
    context: { attempts: 0, password: SECRET, metadata: null },
    initial: 'marker',
    on: { TERMINATE: { target: '.failed' }, NUDGE: { actions: assign({ attempts: ({ context }) => context.attempts }) } },
    states: {
      marker: {
        tags: ['NotReady/Provisioning'],
        invoke: { id: 'marker', src: 'checkMarker', onDone: 'work', onError: 'failed' },
      },
      work: {
        type: 'parallel',
        tags: ['NotReady/Provisioning'],
        after: { totalDeadline: 'failed' },
        onDone: 'ready',
        states: {
          report: {
            initial: 'sending',
            states: {
              sending: { invoke: { id: 'inProgress', src: 'reportInProgress', onDone: 'sent', onError: 'sent' } },
              sent: { type: 'final' },
            },
          },
          metadata: {
            meta: { retry: { attempt: 'requesting', backoff: 'backoff', every: 'retryInterval' } },
            initial: 'requesting',
            states: {
              requesting: {
                invoke: {
                  id: 'imds',
                  src: 'fetchMetadata',
                  onDone: { target: 'validating', actions: assign({ metadata: ({ event }) => event.output }) },
                  onError: [
                    { guard: 'canRetry', target: 'backoff', actions: assign({ attempts: ({ context }) => context.attempts + 1 }) },
                    { target: '#firstboot.failed' },
                  ],
                },
              },
              backoff: { after: { retryInterval: 'requesting' } },
              validating: { always: 'done' },
              done: { type: 'final' },
            },
          },
        },
      },
      ready: {
        tags: ['Ready'],
        invoke: { id: 'readyReport', src: 'reportReady', onDone: 'provisioned', onError: 'failed' },
      },
      provisioned: { type: 'final', tags: ['Ready'] },
      failed: { type: 'final', tags: ['NotReady/ProvisioningFailed'] },
    },
    output: ({ context }) =>
      context.metadata
        ? { result: 'provisioned', exitCode: 0, password: context.password }
        : { result: 'failed', exitCode: 1, reason: 'failed to retrieve instance metadata', password: context.password },
  });
}

export interface Run {
  output: unknown;
  events: InspectionEvent[];
}

/** Runs a machine to completion with the given inspect observers, and returns its output and every inspection event. */
export async function runMachine(
  machine: AnyStateMachine,
  observers: Array<(event: InspectionEvent) => void>,
  send: Array<{ type: string; [key: string]: unknown }> = [],
): Promise<Run> {
  const events: InspectionEvent[] = [];
  const actor = createActor(machine, {
    inspect: (event) => {
      events.push(event);
      for (const observe of observers) observe(event);
    },
  });
  actor.start();
  for (const event of send) actor.send(event);
  const output = await toPromise(actor);
  return { output, events };
}

/** Runs the fixture machine with a journal in a fresh temp dir and returns the machine and its journal lines. */
export async function journalledRun(options: FixtureOptions, send: Array<{ type: string; [key: string]: unknown }> = []) {
  const { createJournal, readJournal } = await import('../../src/inspect/journal.js');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-run-'));
  const machine = fixtureMachine(options);
  const journal = createJournal({ dir, vmId: 'vm-fixture' });
  const run = await runMachine(machine, [journal.inspect], send);
  journal.close();
  const bytes = fs.readFileSync(journal.path);
  const lines = readJournal(journal.path);
  fs.rmSync(dir, { recursive: true, force: true });
  return { machine, lines, bytes, run };
}
