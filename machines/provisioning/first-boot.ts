/**
 * `provisioning`: the work (gather → validate → configure the OS → configured) ‖ this VM's own SSH host keys ‖ the
 * in-progress report. Regions start their actors in document order, so the IMDS request, which Ready waits on,
 * leaves first, and the in-progress report, which nothing waits on, last; the media read and the host keys wait
 * until that request has been written (their `waitingForImds`), the in-progress report does not: a run that fails
 * as soon as IMDS answers would otherwise leave before the fabric heard that provisioning started.
 */
import { assign } from 'xstate';
import { HEALTH_IN_PROGRESS } from '../../src/azure/health.js';
import { toFailure } from '../../src/core/errors.js';
import { configured, configuringOs, validating } from './configuring-os.js';
import { checkingProxyAgent, gathering } from './gathering.js';
import { hostKeysWaitForImds } from './head-start.js';
import { failRun, retried } from './targets.js';
import { chart } from './setup.js';

const IN_PROGRESS_DONE = '#provisioning.provisioning.inProgress.done';

// The image's host keys are the captured machine's; this VM's own depend on nothing IMDS or the media say, so they
// are made while the metadata is fetched, off sshd's critical path. A pool VM makes them again once claimed.
const hostKeys = chart.createStateConfig({
  initial: 'waitingForImds',
  states: {
    // ssh-keygen's fork and its CPU must not delay the IMDS request Ready waits on: the keys are made once the
    // media read has begun, when that request has left or its head start is over.
    waitingForImds: hostKeysWaitForImds,
    replacing: {
      invoke: {
        id: 'host-keys',
        src: 'regenerateHostKeys',
        input: ({ context }) => ({ config: context.config }),
        onDone: [
          {
            guard: { type: 'hostKeysLeft', params: ({ event }) => ({ later: event.output }) },
            target: 'waiting',
            actions: assign({ hostKeysLater: ({ event }) => event.output }),
          },
          { target: 'done' },
        ],
        onError: failRun,
      },
    },
    // Types sshd can take while it runs (rsa by default, the slow one): sshd's drop-in and READY=1 do not wait for
    // them, and they are made once READY=1 was sent, so their CPU never delays it.
    waiting: { always: { guard: 'osConfigured', target: 'adding' } },
    adding: {
      after: {
        osTimeout: {
          target: 'done',
          actions: {
            type: 'warn',
            params: ({ context }) => ({
              text: `ssh host keys ${context.hostKeysLater.join(', ')} not made within ${context.config.os.timeout_secs} s; sshd offers the others`,
            }),
          },
        },
      },
      invoke: {
        id: 'laterHostKeys',
        src: 'addHostKeys',
        input: ({ context }) => ({ config: context.config, types: context.hostKeysLater }),
        onDone: 'done',
        onError: {
          target: 'done',
          actions: { type: 'warn', params: ({ context, event }) => ({ text: `ssh host keys ${context.hostKeysLater.join(', ')} not made: ${toFailure(event.error).reason}` }) },
        },
      },
    },
    done: { type: 'final' },
  },
});

// Nothing waits for it: a report the wireserver refuses is given up, the run goes on.
const inProgress = chart.createStateConfig({
  initial: 'sending',
  states: {
    sending: retried({
      invoke: {
        id: 'inProgressReport',
        src: 'reportHealth',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId, health: HEALTH_IN_PROGRESS, failure: null, ppsType: context.ppsType }),
        onDone: IN_PROGRESS_DONE,
      },
      every: 'wireserverRetryInterval',
      onFatal: { target: IN_PROGRESS_DONE },
    }),
    done: { type: 'final' },
  },
});

export const provisioning = chart.createStateConfig({
  type: 'parallel',
  tags: [HEALTH_IN_PROGRESS],
  // Once the OS is configured a stop is never a failure: the report-pending marker is made durable first (a write
  // in flight is waited for), then the run ends leaving Ready for the next boot. Before that, the root's rule.
  on: {
    TERMINATE: [
      { guard: 'reportPendingInFlight', actions: 'recordReadyTerminated' },
      { guard: 'reportPendingDown', target: '#provisioning.readyNotAccepted', actions: 'recordReadyTerminated' },
    ],
  },
  states: {
    work: {
      initial: 'gathering',
      states: { gathering, checkingProxyAgent, validating, configuringOs, configured },
    },
    hostKeys,
    inProgress,
  },
});
