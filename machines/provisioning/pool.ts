/**
 * A pool VM (docs/preprovisioned.md): Ready goes to the pool, then what the pool type asks. Running and Savable write
 * a durable marker (a reboot waits again) and poll `reprovisiondata` with no deadline until the customer's
 * ovf-env.xml arrives; provisioning then starts again with it. Savable first waits for the host to detach the NIC and
 * hot-attach the customer's, each with a deadline, and finds the primary one among those attached (the one through
 * which the fabric answers). PreprovisionedOSDisk writes its own marker and waits, with no deadline, for the host to
 * shut the VM down: a boot that finds that marker was started again instead (gathering.ts). While Running and Savable
 * VMs poll, the NIC's carrier is watched: the claim moves it to the customer's network, and the lease is renewed.
 * A Savable VM's reuse marker has a name of its own: a resumed run reports its type and waits for an attached NIC
 * (one present counts), and while it polls, a NIC that goes sends it back to that wait.
 */
import { assign } from 'xstate';
import { HEALTH_READY } from '../../src/azure/health.js';
import { failure, toFailure } from '../../src/core/errors.js';
import type { PhaseMeta } from '../retry.js';
import { timedOut } from '../retry.js';
import { FAIL, failRun, retried, withError } from './targets.js';
import { chart } from './setup.js';

const POOL = '#provisioning.preprovisioned';
/** Ready reached the pool and the marker is down: a stop ends the run quietly, the next boot waits again. */
const STOP_WAITING = { TERMINATE: '#provisioning.waitingInterrupted' } as const;
/**
 * Ready reached the pool and its marker is being written: a stop waits for the marker (the next boot then waits
 * again, never sending the pool a second Ready) and ends as a stop in the wait does, never as ProvisioningFailed.
 */
const WHILE_MARKING = { TERMINATE: { actions: 'recordPoolTerminating' } } as const;

const reportingPoolReady = retried({
  state: { entry: { type: 'writeReportToKvp', params: { health: HEALTH_READY } } },
  invoke: {
    id: 'poolReadyReport',
    src: 'reportHealth',
    // A Savable VM's NIC may be unplugged, or the VM saved, before the answer arrives: a request that was sent counts.
    input: ({ context }) => ({
      config: context.config,
      vmId: context.vmId,
      health: HEALTH_READY,
      failure: null,
      ppsType: context.ppsType,
      ...(context.ppsType === 'Savable' ? { answerMayBeLost: true } : {}),
    }),
    onDone: [
      { guard: 'poolOsDisk', target: `${POOL}.markingShutdown` },
      { target: `${POOL}.markingWaiting` },
    ],
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
});

/** A deadline of the Savable waits: the failure names what the host did not do, and within how long. */
const nicDeadline = (what: string, secs: (config: { preprovisioning: { nic_detach_timeout_secs: number; nic_attach_timeout_secs: number } }) => number) => ({
  target: FAIL,
  actions: {
    type: 'recordFailure' as const,
    params: ({ context }: { context: { config: Parameters<typeof secs>[0] } }) => ({
      error: failure('TIMEOUT', [['error', `${what} within ${secs(context.config)} s`], ['phase', 'preprovisioning']]),
    }),
  },
});

// The host detaches the pool's NIC once it has the Ready; then it saves the VM until a customer claims it.
const detachingNic = chart.createStateConfig({
  meta: { budget: 'nicDetachTimeout' } satisfies PhaseMeta,
  on: STOP_WAITING,
  after: { nicDetachTimeout: nicDeadline('the host did not detach the network interface', (c) => c.preprovisioning.nic_detach_timeout_secs) },
  invoke: {
    id: 'nicDetach',
    src: 'waitForNicDetach',
    input: ({ context }) => ({ config: context.config }),
    onDone: 'attachingNic',
    onError: failRun,
  },
});

// Once restored for a customer the VM gets NICs hot-attached: each is tried in turn until the fabric answers through one.
const attachingNic = chart.createStateConfig({
  meta: { budget: 'nicAttachTimeout' } satisfies PhaseMeta,
  on: STOP_WAITING,
  after: { nicAttachTimeout: nicDeadline('no attached network interface reached the fabric', (c) => c.preprovisioning.nic_attach_timeout_secs) },
  initial: 'listening',
  states: {
    listening: {
      invoke: {
        id: 'nicAttach',
        src: 'waitForNicAttach',
        input: ({ context }) => ({ config: context.config, tried: context.nicsTried }),
        onDone: { target: 'probing', actions: assign({ nic: ({ event }) => event.output }) },
        onError: failRun,
      },
    },
    probing: {
      invoke: {
        id: 'primaryNic',
        src: 'probePrimaryNic',
        input: ({ context }) => ({ config: context.config, nic: context.nic! }),
        onDone: `${POOL}.waiting`,
        onError: [
          // Not the primary (no lease, or the fabric does not answer through it): the next one.
          { guard: { type: 'retryable', params: withError }, target: 'listening', actions: 'recordNicTried' },
          failRun,
        ],
      },
    },
  },
});

/**
 * The claim moves the NIC to the customer's network (its carrier goes down and up): the lease is renewed through the
 * OS's network stack, which not every stack does on its own, while the polls go on (on the pool's network they
 * only ever hear "not yet"). A watch that cannot run is a warning: a stack that renews by itself still gets there.
 */
const lease = chart.createStateConfig({
  initial: 'watching',
  states: {
    watching: {
      invoke: {
        id: 'carrier',
        src: 'waitForCarrierSwitch',
        input: ({ context }) => ({ config: context.config }),
        onDone: { target: 'renewing', actions: assign({ leaseNic: ({ event }) => event.output }) },
        onError: { target: 'off', actions: { type: 'warn', params: ({ event }) => ({ text: `network watch stopped: ${toFailure(event.error).reason}` }) } },
      },
    },
    renewing: {
      invoke: {
        id: 'lease',
        src: 'renewLease',
        input: ({ context }) => ({ config: context.config, nic: context.leaseNic ?? '' }),
        onDone: 'watching',
        onError: { target: 'watching', actions: { type: 'warn', params: ({ event }) => ({ text: `lease not renewed: ${toFailure(event.error).reason}` }) } },
      },
    },
    off: { type: 'final' },
  },
});

/**
 * A Savable VM polls through the NIC it found; should that NIC go (a resumed run may have found the pool's, which the
 * host then detaches), it waits for an attached one again. A watch that cannot run is a warning.
 */
const nicKept = chart.createStateConfig({
  initial: 'deciding',
  states: {
    deciding: { always: [{ guard: 'poolSavable', target: 'watching' }, { target: 'off' }] },
    watching: {
      invoke: {
        id: 'nicGone',
        src: 'waitForNicDetach',
        input: ({ context }) => ({ config: context.config }),
        onDone: { target: `${POOL}.attachingNic`, actions: 'recordNicGone' },
        onError: { target: 'off', actions: { type: 'warn', params: ({ event }) => ({ text: `NIC watch stopped: ${toFailure(event.error).reason}` }) } },
      },
    },
    off: { type: 'final' },
  },
});

// Polling and the lease's watch side by side; with no deadline, until the claim. A reboot comes back here.
const waiting = chart.createStateConfig({
  type: 'parallel',
  on: STOP_WAITING,
  states: {
    nicKept,
    polling: retried({
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
    lease,
  },
});

export const preprovisioned = chart.createStateConfig({
  tags: [HEALTH_READY],
  initial: 'reportingPoolReady',
  states: {
    reportingPoolReady,
    markingWaiting: {
      on: WHILE_MARKING,
      invoke: {
        id: 'waitingMarker',
        src: 'markWaitingForReuse',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId, ppsType: context.ppsType }),
        onDone: [{ guard: 'terminating', target: '#provisioning.waitingInterrupted' }, { guard: 'poolSavable', target: 'detachingNic' }, { target: 'waiting' }],
        onError: failRun,
      },
    },
    detachingNic,
    attachingNic,
    waiting,
    markingShutdown: {
      on: WHILE_MARKING,
      invoke: {
        id: 'shutdownMarker',
        src: 'markWaitingForShutdown',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
        onDone: [{ guard: 'terminating', target: '#provisioning.shutDownInPool' }, { target: 'awaitingShutdown' }],
        onError: failRun,
      },
    },
    // No deadline: the host's shutdown (SIGTERM) is the end this VM waits for. A tick re-enters the state so the
    // service manager keeps hearing that the wait goes on.
    awaitingShutdown: {
      on: { TERMINATE: '#provisioning.shutDownInPool' },
      after: { shutdownTick: { target: 'awaitingShutdown', reenter: true } },
    },
  },
});
