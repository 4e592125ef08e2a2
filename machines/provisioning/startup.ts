/**
 * The run's first state. What comes before the chart — the config, whether this is an Azure VM at all, the instance
 * lock, the VM id and its marker — is read by src/provision/provision.ts before the chart is even loaded, and handed to it
 * as input (`startup`); `starting` routes on those facts at once: another agent holds the lock (nothing more), not an
 * Azure VM (nothing more), something could not be read (report it), or the marker decides what this boot does —
 * nothing (provisioned), Ready again (report pending), wait again (a pool VM already in the pool) or provision. A
 * config that failed to load is reported only by a boot that would wait again or provision: a provisioned marker or a
 * pending Ready is an outcome already known, and the failure is then a warning.
 */
import { chart } from './setup.js';
import type { ProvisioningContext } from './types.js';

/** A failure read before the chart, as the `error` of `recordFailure`. */
const failureOf = (read: (context: ProvisioningContext) => unknown) => ({ context }: { context: ProvisioningContext }) => ({ error: read(context) });

export const starting = chart.createStateConfig({
  // The VM id, a platform check that could not decide: taken from the input.
  entry: 'recordStartup',
  always: [
    // The agent holding the lock reports; a second report from here could only contradict it.
    { guard: 'lockRefused', target: 'alreadyRunning', actions: { type: 'recordFailure', params: failureOf((c) => c.startup.lockRefused) } },
    // Off Azure there is no fabric to provision from or report to: the run ends before the first request.
    { guard: 'notOnAzure', target: 'notOnAzure' },
    { guard: 'vmIdUnreadable', target: 'reportingFailure', actions: { type: 'recordFailure', params: failureOf((c) => c.startup.vmIdFailure) } },
    // A marker that proves the outcome wins over a config that failed to load (read for where the markers are): the
    // failure is a warning, never reported as the opposite of what this VM id already told the fabric or earned.
    { guard: 'markerProvisioned', target: 'alreadyProvisioned', actions: { type: 'warnConfigFailed', params: { then: 'already provisioned: nothing is reported' } } },
    { guard: 'markerReportPending', target: 'completingHostKeys', actions: { type: 'warnConfigFailed', params: { then: 'the OS was configured on an earlier boot: Ready is reported' } } },
    // The config failure, reported now that the VM id is known, by a boot that would provision or wait again.
    { guard: 'configFailed', target: 'reportingFailure', actions: { type: 'recordFailure', params: failureOf((c) => c.startup.configFailure) } },
    { guard: 'markerUnreadable', target: 'reportingFailure', actions: { type: 'recordFailure', params: failureOf((c) => c.startup.markerFailure) } },
    // Ready already reached the pool in an earlier boot: wait again, never report it twice. A Savable VM's NIC may be
    // the pool's, gone, or the customer's: it waits for one (one present counts) and tries it as the primary again.
    { guard: 'markerWaitingForReuse', target: '#provisioning.preprovisioned.waiting', actions: { type: 'recordResumedWait', params: { ppsType: 'Running' } } },
    { guard: 'markerWaitingForSavable', target: '#provisioning.preprovisioned.attachingNic', actions: { type: 'recordResumedWait', params: { ppsType: 'Savable' } } },
    { target: 'provisioning' },
  ],
});
