/**
 * The network step of every boot (`bootstate network`, bootstate-network.service): ask IMDS for its `network`
 * section with the same retries and total deadline as provisioning's IMDS request, make a plan of it, look at the
 * machine (its interfaces, its network stack, the image's own configuration), render bootstate's files for the stack,
 * then write them and make them take effect (one step: each stack needs its own order of writes and reloads). Three ends: `configured` (warnings about single NICs included), `kept` (no plan, no stack, or IMDS
 * silent: the image's own configuration stays as it is, and so do bootstate's files of earlier boots), and
 * `failed` (rendering, writing or applying failed, or the step outlived its deadline).
 *
 * The chart performs no I/O: its five actors are provided by the run (src/network/pass.ts).
 */
import { assign, setup } from 'xstate';
import { failure, toFailure, type Failure } from '../src/core/errors.js';
import { placeholder } from './placeholder.js';
import { retryable, retryFor, timedOut, withError, type PhaseMeta } from './retry.js';

export interface NetworkRunInput {
  retryIntervalMs: number;
  /** IMDS's total deadline, retries included. */
  totalTimeoutMs: number;
  /** The deadline of everything after IMDS: reading the machine, writing, applying. */
  configureTimeoutMs: number;
}

export type NetworkResult = 'configured' | 'kept' | 'failed';

export interface NetworkRunOutput {
  result: NetworkResult;
  /** Why `kept` or `failed`, in one phrase. */
  why: string | null;
  failure: Failure | null;
}

export interface NetworkContext extends NetworkRunInput {
  document: unknown;
  why: string | null;
  failure: Failure | null;
}

const networkSetup = setup({
  types: {
    context: {} as NetworkContext,
    input: {} as NetworkRunInput,
    output: {} as NetworkRunOutput,
  },
  actors: {
    /** One IMDS request: the whole document, as JSON. */
    fetchDocument: placeholder<unknown, void>('fetchDocument'),
    /** The plan from the document; `null` with why when there is none (the section missing, malformed or empty). */
    plan: placeholder<{ planned: boolean; why: string | null }, { document: unknown }>('plan'),
    /** The machine's interfaces bound to the plan, its stack, the image's conflicting files; no stack → why. */
    inspect: placeholder<{ stack: string | null; why: string | null }, void>('inspect'),
    /** bootstate's files for the stack, rendered from the plan (nothing written yet). */
    render: placeholder<void, void>('render'),
    /**
     * The files written (replaced whole; those of NICs gone removed) and made live by the stack's own reload, in the
     * order the stack needs; a secondary NIC that fails is a warning, not an error.
     */
    apply: placeholder<void, void>('apply'),
  },
  guards: {
    retryable,
    planned: (_, params: { planned: boolean }) => params.planned,
    haveStack: (_, params: { stack: string | null }) => params.stack !== null,
  },
  delays: {
    retryInterval: ({ context }) => context.retryIntervalMs,
    totalTimeout: ({ context }) => context.totalTimeoutMs,
    configureTimeout: ({ context }) => context.configureTimeoutMs,
  },
  actions: {
    recordImdsFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordImdsTimeout: assign({
      failure: ({ context }) => timedOut(`IMDS did not answer within ${context.totalTimeoutMs / 1000} s`, context.failure),
    }),
    keptBecause: assign({ why: (_, params: { why: string | null }) => params.why ?? 'no reason given' }),
    recordFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordTimeout: assign({
      failure: ({ context }) => timedOut(`the network step did not end within ${context.configureTimeoutMs / 1000} s`, null),
    }),
  },
});

const retried = retryFor(networkSetup);

/** An actor's output as a guard's or an action's params. */
const output = <T>({ event }: { event: { output?: unknown } }) => event.output as T;

export const networkMachine = networkSetup.createMachine({
  id: 'network',
  context: ({ input }) => ({ ...input, document: null, why: null, failure: null }),
  initial: 'fetching',
  output: ({ context, event }) => {
    const result = (event.output as { result?: NetworkResult } | undefined)?.result ?? 'failed';
    const imdsSilent = result === 'kept' && context.why === null;
    return {
      result,
      why: imdsSilent ? `IMDS gave no network section: ${context.failure?.reason ?? 'no answer'}` : context.why,
      failure: result === 'failed' ? (context.failure ?? failure('UNHANDLED', [])) : imdsSilent ? context.failure : null,
    };
  },
  states: {
    fetching: retried({
      invoke: {
        id: 'imds',
        src: 'fetchDocument',
        onDone: { target: '#network.planning', actions: assign({ document: ({ event }) => event.output, failure: null }) },
      },
      every: 'retryInterval',
      deadline: { after: 'totalTimeout', then: { target: 'kept', actions: 'recordImdsTimeout' } },
      onRetry: { type: 'recordImdsFailure', params: withError },
      onFatal: { target: '#network.kept', actions: { type: 'recordImdsFailure', params: withError } },
    }),
    planning: {
      invoke: {
        id: 'plan',
        src: 'plan',
        input: ({ context }) => ({ document: context.document }),
        onDone: [
          { guard: { type: 'planned', params: output }, target: 'configuring' },
          { target: 'kept', actions: { type: 'keptBecause', params: output } },
        ],
        onError: { target: 'failed', actions: { type: 'recordFailure', params: withError } },
      },
    },
    configuring: {
      initial: 'inspecting',
      meta: { budget: 'configureTimeout' } satisfies PhaseMeta,
      after: { configureTimeout: { target: 'failed', actions: 'recordTimeout' } },
      states: {
        inspecting: {
          invoke: {
            id: 'inspect',
            src: 'inspect',
            onDone: [
              { guard: { type: 'haveStack', params: output }, target: 'rendering' },
              { target: '#network.kept', actions: { type: 'keptBecause', params: output } },
            ],
            onError: { target: '#network.failed', actions: { type: 'recordFailure', params: withError } },
          },
        },
        rendering: {
          invoke: {
            id: 'render',
            src: 'render',
            onDone: 'applying',
            onError: { target: '#network.failed', actions: { type: 'recordFailure', params: withError } },
          },
        },
        applying: {
          invoke: {
            id: 'apply',
            src: 'apply',
            onDone: '#network.configured',
            onError: { target: '#network.failed', actions: { type: 'recordFailure', params: withError } },
          },
        },
      },
    },
    configured: { type: 'final', output: { result: 'configured' } },
    kept: { type: 'final', output: { result: 'kept' } },
    failed: { type: 'final', output: { result: 'failed' } },
  },
});
