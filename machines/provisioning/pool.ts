/**
 * A pool VM (PPS type Running): Ready goes to the pool, a durable marker records it, then `reprovisiondata` is
 * polled with no deadline until the customer's ovf-env.xml arrives; provisioning then starts again with it.
 */
import { HEALTH_READY } from '../../src/azure/health.js';
import { timedOut } from '../retry.js';
import { FAIL, failRun, retried, withError } from './targets.js';
import { chart } from './setup.js';


export const preprovisioned = chart.createStateConfig({
  tags: [HEALTH_READY],
  initial: 'reportingPoolReady',
  states: {
    reportingPoolReady: retried({
      state: { entry: { type: 'writeReportToKvp', params: { health: HEALTH_READY } } },
      invoke: {
        id: 'poolReadyReport',
        src: 'reportHealth',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId, health: HEALTH_READY, failure: null, ppsType: context.ppsType }),
        onDone: '#provisioning.preprovisioned.markingWaiting',
      },
      every: 'wireserverRetryInterval',
      deadline: {
        after: 'wireserverTotalTimeout',
        then: {
          target: FAIL,
          actions: {
            type: 'recordFailure',
            params: ({ context }) => ({
              error: timedOut(`the wireserver did not accept the pool's Ready within ${context.config.wireserver.total_retry_timeout_secs} s`, null),
            }),
          },
        },
      },
      onFatal: failRun,
    }),
    markingWaiting: {
      invoke: {
        id: 'waitingMarker',
        src: 'markWaitingForReuse',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
        onDone: 'waiting',
        onError: failRun,
      },
    },
    waiting: retried({
      // The pool's Ready stands and the marker is down: a stop ends the run quietly, the next boot waits again.
      state: { on: { TERMINATE: '#provisioning.waitingInterrupted' } },
      invoke: {
        id: 'reprovision',
        src: 'pollReprovisionData',
        input: ({ context }) => ({ config: context.config, attempt: context.pollAttempts + 1, previousError: context.pollError }),
        onDone: { target: '#provisioning.provisioning', actions: { type: 'recordClaim', params: ({ event }) => ({ media: event.output }) } },
      },
      every: 'reprovisionPollInterval',
      onRetry: { type: 'recordPollFailure', params: withError },
      onFatal: failRun,
    }),
  },
});
