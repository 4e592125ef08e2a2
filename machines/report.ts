/**
 * One health report on its own (`bootstate report ready|in-progress|failure`): request → backoff → request until
 * accepted, refused, or the total deadline pre-empts whatever is in flight. The same retry rules as the
 * reporting states of the provisioning chart, for image builders who run each step themselves.
 */
import { assign, fromPromise, setup } from 'xstate';
import { failure, toFailure, type Failure } from '../src/core/errors.js';

export interface ReportRunInput {
  retryIntervalMs: number;
  totalTimeoutMs: number;
}

export interface ReportRunOutput {
  accepted: boolean;
  failure: Failure | null;
}

export const reportMachine = setup({
  types: {
    context: {} as ReportRunInput & { failure: Failure | null },
    input: {} as ReportRunInput,
    output: {} as ReportRunOutput,
  },
  actors: {
    post: fromPromise<void, void>(async () => {
      throw new Error('actor post was not provided');
    }),
  },
  guards: {
    retryable: (_, params: { error: unknown }) => toFailure(params.error).retryable,
  },
  delays: {
    retryInterval: ({ context }) => context.retryIntervalMs,
    totalTimeout: ({ context }) => context.totalTimeoutMs,
  },
  actions: {
    recordFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
  },
}).createMachine({
  id: 'report',
  context: ({ input }) => ({ ...input, failure: null }),
  initial: 'reporting',
  // The final state says whether the report was accepted; the failure says why not.
  output: ({ context, event }) => {
    const accepted = (event.output as { accepted?: boolean } | undefined)?.accepted === true;
    return { accepted, failure: accepted ? null : context.failure };
  },
  states: {
    reporting: {
      meta: { retry: { attempt: 'requesting', backoff: 'backoff', every: 'retryInterval', deadline: 'totalTimeout' } },
      initial: 'requesting',
      after: {
        totalTimeout: {
          target: 'notAccepted',
          actions: assign({
            failure: ({ context }) =>
              failure('TIMEOUT', [
                ['error', `not accepted within ${context.totalTimeoutMs / 1000} s`],
                ...(context.failure ? ([['last_error', context.failure.reason]] as Array<[string, string]>) : []),
              ]),
          }),
        },
      },
      states: {
        requesting: {
          invoke: {
            id: 'post',
            src: 'post',
            onDone: '#report.accepted',
            onError: [
              {
                guard: { type: 'retryable', params: ({ event }) => ({ error: event.error }) },
                target: 'backoff',
                actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) },
              },
              { target: '#report.notAccepted', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
            ],
          },
        },
        backoff: { after: { retryInterval: 'requesting' } },
      },
    },
    accepted: { type: 'final', output: { accepted: true } },
    notAccepted: { type: 'final', output: { accepted: false } },
  },
});
