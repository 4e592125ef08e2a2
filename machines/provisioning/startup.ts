/**
 * The run's first states: the config, whether this is an Azure VM at all, the VM id, and its marker, which decides
 * what this boot does — nothing (provisioned), Ready again (report pending), wait again (a pool VM already in the
 * pool) or provision.
 */
import { assign } from 'xstate';
import { toFailure } from '../../src/core/errors.js';
import { withError } from './retry.js';
import { chart } from './setup.js';

const fail = { target: 'reportingFailure', actions: { type: 'recordFailure', params: withError } } as const;

export const loadingConfig = chart.createStateConfig({
  invoke: {
    id: 'config',
    src: 'loadConfig',
    onDone: { target: 'checkingPlatform', actions: assign({ config: ({ event }) => event.output }) },
    // The failure is reported once the VM id is known.
    onError: { target: 'checkingPlatform', actions: { type: 'recordFailure', params: withError } },
  },
});

// Off Azure there is no fabric to provision from or report to: the run ends before the first request.
export const checkingPlatform = chart.createStateConfig({
  invoke: {
    id: 'platform',
    src: 'checkPlatform',
    input: ({ context }) => ({ config: context.config }),
    onDone: [{ guard: { type: 'notOnAzure', params: ({ event }) => ({ check: event.output }) }, target: 'notOnAzure' }, { target: 'readingVmId' }],
    // A check that cannot decide must not keep an Azure VM from being provisioned.
    onError: {
      target: 'readingVmId',
      actions: { type: 'warn', params: ({ event }) => ({ text: `platform check failed: ${toFailure(event.error).reason}; provisioning goes on` }) },
    },
  },
});

export const readingVmId = chart.createStateConfig({
  invoke: {
    id: 'vmId',
    src: 'readVmId',
    onDone: [
      { guard: 'configFailed', target: 'reportingFailure', actions: assign({ vmId: ({ event }) => event.output }) },
      { target: 'checkingMarker', actions: assign({ vmId: ({ event }) => event.output }) },
    ],
    onError: fail,
  },
});

export const checkingMarker = chart.createStateConfig({
  invoke: {
    id: 'marker',
    src: 'checkMarker',
    input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
    onDone: [
      { guard: { type: 'markerProvisioned', params: ({ event }) => ({ state: event.output }) }, target: 'alreadyProvisioned' },
      { guard: { type: 'markerReportPending', params: ({ event }) => ({ state: event.output }) }, target: 'reportingReady' },
      // Ready already reached the pool in an earlier boot: wait again, never report it twice.
      {
        guard: { type: 'markerWaitingForReuse', params: ({ event }) => ({ state: event.output }) },
        target: '#provisioning.preprovisioned.waiting',
        actions: 'recordResumedWait',
      },
      { target: 'provisioning' },
    ],
    onError: fail,
  },
});
