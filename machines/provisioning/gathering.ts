/**
 * Gathering what the plan is made from: IMDS and the provisioning media, side by side, then the Guest Proxy Agent
 * when this VM asks for it, then the decision what kind of run this is (a pool VM, an OS-disk pool VM started again,
 * a refused pool type, a plan, or no metadata at all).
 */
import { assign } from 'xstate';
import { toFailure } from '../../src/core/errors.js';
import { poolAfterClaim, proxyAgentSilent } from './plan.js';
import type { PhaseMeta } from '../retry.js';
import { proxyAgentSecs } from './delays.js';
import { mediaWaitsForImds, tellWritten } from './head-start.js';
import { FAIL, failRun, retried, withError } from './targets.js';
import { chart } from './setup.js';
import type { ProvisioningContext } from './types.js';

const IMDS_DONE = '#provisioning.provisioning.work.gathering.imds.done';

/** Once everything that can change the plan has arrived: a pool VM waits, a refused one fails, the rest is validated. */
const DECISIONS = [
  // An OS-disk pool VM whose Ready reached the pool in an earlier boot should have been shut down, not started again.
  { guard: 'poolShutdownMissed', target: FAIL, actions: 'recordPoolShutdownMissed' },
  { guard: 'poolServed', target: '#provisioning.preprovisioned', actions: 'recordPoolType' },
  { guard: 'poolUnsupported', target: FAIL, actions: 'recordPoolUnsupported' },
  {
    guard: 'poolAfterClaim',
    target: FAIL,
    actions: { type: 'recordFailure', params: ({ context }: { context: ProvisioningContext }) => ({ error: poolAfterClaim(context.metadata?.ppsType) }) },
  },
  { guard: 'havePlan', target: '#provisioning.provisioning.work.validating', actions: 'recordPlan' },
  { target: FAIL, actions: 'recordNoMetadata' },
] as const;

export const gathering = chart.createStateConfig({
  type: 'parallel',
  // Once IMDS is done, what is left is bounded by the media's deadline, which counts from here.
  meta: { budget: 'mediaTimeout' } satisfies PhaseMeta,
  onDone: [{ guard: 'proxyAgentWanted', target: 'checkingProxyAgent' }, ...DECISIONS],
  states: {
    imds: {
      initial: 'fetching',
      states: {
        fetching: retried({
          invoke: {
            id: 'imds',
            src: 'fetchMetadata',
            // Attempt 1 of the first pass (before any claim) may be the request the run sent before the chart was loaded.
            input: ({ context, self }) => ({
              config: context.config,
              attempt: context.imdsRetries + 1,
              sent: !!context.startup.imdsSent && context.reprovision === null && context.imdsRetries === 0,
              written: tellWritten(self),
            }),
            onDone: { target: IMDS_DONE, actions: assign({ metadata: ({ event }) => event.output, imdsFailure: null }) },
          },
          every: 'imdsRetryInterval',
          deadline: { after: 'imdsTotalTimeout', then: { target: IMDS_DONE, actions: 'recordImdsTimeout' } },
          onRetry: { type: 'recordImdsRetry', params: withError },
          onFatal: { target: IMDS_DONE, actions: { type: 'recordImdsFailure', params: withError } },
        }),
        done: { type: 'final' },
      },
    },
    // The media is always waited for: besides the password it carries pool flags and CustomData, which IMDS may not
    // mention, so an answer that arrives second must change the plan as one that arrives first would. Its own short
    // deadline keeps a wedged device from holding the run.
    media: {
      initial: 'waitingForImds',
      states: {
        // The IMDS request, which Ready waits on, gets a head start: the read begins once the request has been
        // written to its socket or its attempt has ended (`imds.sent`, from the IMDS actor), or after a short bound
        // for a connection that hangs. Run first, the read's first file call would start libuv's thread pool and
        // load fs/promises while the IMDS connection waited for the CPU. The host keys wait for the same moment.
        waitingForImds: mediaWaitsForImds,
        reading: {
          after: {
            mediaTimeout: {
              target: 'done',
              actions: {
                type: 'warn',
                params: ({ context }) => ({
                  text: `provisioning media: not read within ${context.config.provisioning_media.timeout_secs} s; provisioning goes on without it`,
                }),
              },
            },
          },
          invoke: {
            id: 'media',
            src: 'readMedia',
            input: ({ context }) => ({ config: context.config, claimed: context.reprovision !== null }),
            onDone: { target: 'done', actions: assign({ media: ({ event }) => event.output }) },
            onError: {
              target: 'done',
              actions: assign({
                warnings: ({ context, event }) => [...context.warnings, `provisioning media: ${toFailure(event.error).reason}`],
                mediaFailure: ({ event }) => toFailure(event.error),
              }),
            },
          },
        },
        done: { type: 'final' },
      },
    },
  },
});

// The media (or the configuration) asks for Azure's Guest Proxy Agent: nothing goes on until it is ready.
export const checkingProxyAgent = chart.createStateConfig({
  meta: { budget: 'proxyAgentTimeout' } satisfies PhaseMeta,
  after: {
    proxyAgentTimeout: {
      target: FAIL,
      actions: {
        type: 'recordFailure',
        params: ({ context }) => ({
          error: proxyAgentSilent(proxyAgentSecs(context)),
        }),
      },
    },
  },
  invoke: {
    id: 'proxyAgent',
    src: 'checkProxyAgent',
    input: ({ context }) => ({ config: context.config }),
    onDone: [...DECISIONS],
    onError: failRun,
  },
});
