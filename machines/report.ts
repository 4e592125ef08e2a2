/**
 * One health report on its own (`bootstate report ready|in-progress|failure`): request → backoff → request until
 * accepted, refused, or the total deadline pre-empts whatever is in flight. The same retry rules as the
 * reporting states of the provisioning chart, for image builders who run each step themselves.
 */
import { assign, setup } from 'xstate';
import { toFailure, type Failure } from '../src/core/errors.js';
import { placeholder } from './placeholder.js';
import { retryable, retryFor, timedOut, withError } from './retry.js';

export interface ReportRunInput {
  retryIntervalMs: number;
  totalTimeoutMs: number;
}

export interface ReportRunOutput {
  accepted: boolean;
  failure: Failure | null;
}

const reportSetup = setup({
  types: {
    context: {} as ReportRunInput & { failure: Failure | null },
    input: {} as ReportRunInput,
    output: {} as ReportRunOutput,
  },
  actors: { post: placeholder<void, void>('post') },
  guards: { retryable },
  delays: {
    retryInterval: ({ context }) => context.retryIntervalMs,
    totalTimeout: ({ context }) => context.totalTimeoutMs,
  },
  actions: {
    recordFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordTimeout: assign({ failure: ({ context }) => timedOut(`not accepted within ${context.totalTimeoutMs / 1000} s`, context.failure) }),
  },
});

const retried = retryFor(reportSetup);

export const reportMachine = reportSetup.createMachine({
  id: 'report',
  context: ({ input }) => ({ ...input, failure: null }),
  initial: 'reporting',
  // The final state says whether the report was accepted; the failure says why not.
  output: ({ context, event }) => {
    const accepted = (event.output as { accepted?: boolean } | undefined)?.accepted === true;
    return { accepted, failure: accepted ? null : context.failure };
  },
  states: {
    reporting: retried({
      invoke: { id: 'post', src: 'post', onDone: '#report.accepted' },
      every: 'retryInterval',
      deadline: { after: 'totalTimeout', then: { target: 'notAccepted', actions: 'recordTimeout' } },
      onRetry: { type: 'recordFailure', params: withError },
      onFatal: { target: '#report.notAccepted', actions: { type: 'recordFailure', params: withError } },
    }),
    accepted: { type: 'final', output: { accepted: true } },
    notAccepted: { type: 'final', output: { accepted: false } },
  },
});
