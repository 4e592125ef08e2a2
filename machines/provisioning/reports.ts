/**
 * The end of a run: the Ready report (after the host keys a stopped earlier boot left missing), the provisioned
 * marker; or the failure report.
 * Each final state says how the run ended (`output`), and the chart's output is made from it.
 */
import { HEALTH_FAILED, HEALTH_READY } from '../../src/azure/health.js';
import { toFailure } from '../../src/core/errors.js';
import { KEYGEN_TIMEOUT_SECS } from '../../src/os/ssh/host-keys.js';
import type { PhaseMeta } from '../retry.js';
import { READY_LEFT, retried, withError } from './targets.js';
import { chart } from './setup.js';
import type { RunEnd } from './types.js';

// A boot that finds the report-pending marker: the OS was configured on an earlier boot, which may have been stopped
// before the host keys it left for the background were made. Whatever type is missing is made now, before READY=1
// (sshd starts after it, and from OpenSSH 9.8 reads its keys only then); then Ready. A key that cannot be made is a
// warning: sshd offers the others.
export const completingHostKeys = chart.createStateConfig({
  // One ssh-keygen per missing type, side by side, each bounded by its own timeout (seconds: not a chart delay).
  meta: { budget: KEYGEN_TIMEOUT_SECS } satisfies PhaseMeta,
  always: { guard: { type: 'stepSkipped', params: { step: 'host-keys' } }, target: 'reportingReady' },
  // The marker is still down: the next boot tries again.
  on: { TERMINATE: { target: 'readyNotAccepted', actions: 'recordReadyTerminated' } },
  invoke: {
    id: 'missingHostKeys',
    src: 'completeHostKeys',
    input: ({ context }) => ({ config: context.config }),
    onDone: 'reportingReady',
    onError: { target: 'reportingReady', actions: { type: 'warn', params: ({ event }) => ({ text: `missing ssh host keys not made: ${toFailure(event.error).reason}` }) } },
  },
});

export const reportingReady = retried({
  // The OS is configured and the report-pending marker is down: logins no longer wait for anything.
  state: {
    tags: [HEALTH_READY],
    entry: ['tellSystemdReady', { type: 'writeReportToKvp', params: { health: HEALTH_READY } }],
    // The report-pending marker is down: the next boot reports Ready.
    on: { TERMINATE: { target: 'readyNotAccepted', actions: 'recordReadyTerminated' } },
  },
  invoke: {
    id: 'readyReport',
    src: 'reportHealth',
    input: ({ context }) => ({ config: context.config, vmId: context.vmId, health: HEALTH_READY, failure: null, ppsType: context.ppsType }),
    onDone: '#provisioning.markingProvisioned',
  },
  every: 'wireserverRetryInterval',
  deadline: { after: 'wireserverTotalTimeout', then: { target: READY_LEFT, actions: 'recordReportTimeout' } },
  onRetry: { type: 'recordReportFailure', params: withError },
  onFatal: { target: READY_LEFT, actions: { type: 'recordReportFailure', params: withError } },
});

export const markingProvisioned = chart.createStateConfig({
  tags: [HEALTH_READY],
  // Ready was accepted; finishing the marker takes milliseconds, so SIGTERM waits for it.
  on: { TERMINATE: {} },
  invoke: {
    id: 'provisionedMarker',
    src: 'markProvisioned',
    input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
    onDone: 'provisioned',
    onError: { target: 'markerNotWritten', actions: { type: 'recordFailure', params: withError } },
  },
});

// The run has failed (context.failure says why); the report only decides whether the fabric heard it.
export const reportingFailure = retried({
  state: {
    tags: [HEALTH_FAILED],
    // Provisioning is over: whatever it left in place is what logins get, without waiting for the report.
    entry: ['tellSystemdReady', { type: 'writeReportToKvp', params: { health: HEALTH_FAILED } }],
    on: {
      TERMINATE: [
        // The short budget counts from the first SIGTERM; later ones change nothing.
        { guard: 'terminating' },
        { target: 'reportingFailure', reenter: true, actions: 'recordTerminated' },
      ],
    },
  },
  invoke: {
    id: 'failureReport',
    src: 'reportHealth',
    input: ({ context }) => ({ config: context.config, vmId: context.vmId, health: HEALTH_FAILED, failure: context.failure, ppsType: context.ppsType }),
    onDone: '#provisioning.failed',
  },
  every: 'wireserverRetryInterval',
  deadline: { after: 'failureReportTimeout', then: { target: '#provisioning.failedUnreported' } },
  onFatal: { target: '#provisioning.failedUnreported' },
});

const end = (result: RunEnd['result'], reported: boolean): RunEnd => ({ result, reported });

/** The ways a run ends. */
export const finals = {
  provisioned: chart.createStateConfig({ type: 'final', tags: [HEALTH_READY], output: end('provisioned', true) }),
  alreadyProvisioned: chart.createStateConfig({ type: 'final', entry: 'tellSystemdReady', output: end('already-provisioned', false) }),
  notOnAzure: chart.createStateConfig({ type: 'final', entry: 'tellSystemdReady', output: end('not-on-azure', false) }),
  // Another agent holds the instance lock and reports; this one only lets systemd go on.
  alreadyRunning: chart.createStateConfig({ type: 'final', entry: 'tellSystemdReady', output: end('failed', false) }),
  waitingInterrupted: chart.createStateConfig({ type: 'final', tags: [HEALTH_READY], output: end('waiting-for-reuse', true) }),
  // An OS-disk pool VM's stop while it waits for one: the host's shutdown, the end it waited for.
  shutDownInPool: chart.createStateConfig({ type: 'final', tags: [HEALTH_READY], output: end('pool-shutdown', true) }),
  readyNotAccepted: chart.createStateConfig({ type: 'final', tags: [HEALTH_READY], output: end('failed', false) }),
  markerNotWritten: chart.createStateConfig({ type: 'final', tags: [HEALTH_READY], output: end('failed', true) }),
  failed: chart.createStateConfig({ type: 'final', tags: [HEALTH_FAILED], output: end('failed', true) }),
  failedUnreported: chart.createStateConfig({ type: 'final', tags: [HEALTH_FAILED], output: end('failed', false) }),
};
