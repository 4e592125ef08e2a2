/**
 * The first-boot provisioning statechart: the control flow of `bootstate provision`.
 *
 * what was read before the chart (config, platform, lock, VM id, marker) → provisioning (work ‖ host keys ‖ InProgress
 * report; once the OS is configured, the report-pending marker beside the last host keys) → Ready → provisioned marker;
 * a failure → ProvisioningFailed; a stop before the OS is configured → ProvisioningFailed, after it → Ready left for
 * the next boot. systemd hears READY=1 once the OS is configured, on entering the failure report, and at the ends that
 * provision nothing, so logins never wait for a report. A pool
 * VM leaves gathering for `preprovisioned` and comes back to `provisioning` with the customer's data. Health is a
 * tag of the state that reports it. Retries, backoff and total deadlines are states and `after` delays: leaving a
 * state aborts its actor, so a deadline holds whatever a server does. Nothing here performs I/O: every actor is a
 * named placeholder that `src/provision/actors.ts` provides for real.
 *
 * One file a part: `startup.ts` (the first states), `first-boot.ts` with `gathering.ts` and `configuring-os.ts`
 * (provisioning), `pool.ts` (pool VMs), `reports.ts` (the end); `setup.ts` names every actor, guard, delay and
 * action (guards.ts, delays.ts, actions.ts,
 * actors.ts); `head-start.ts` is the IMDS head start; `targets.ts` names where failures go and binds the shared
 * retry loop (machines/retry.ts) to this chart.
 */
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { ZERO_VM_ID } from '../../src/core/metadata.js';
import { provisioning } from './first-boot.js';
import { outputOf } from './plan.js';
import { preprovisioned } from './pool.js';
import { completingHostKeys, finals, markingProvisioned, reportingFailure, reportingReady } from './reports.js';
import { withError } from './targets.js';
import { provisioningSetup, type ProvisioningActors, type ProvisioningEffects } from './setup.js';
import { starting } from './startup.js';
import type { RunEnd } from './types.js';

/**
 * Builds the chart, StateNode tree included, on each call, with `actors` in place of the placeholders of their names
 * and `effects` (READY=1) done for real.
 */
export const createProvisioningMachine = (actors: Partial<ProvisioningActors> = {}, effects: ProvisioningEffects = {}) =>
  provisioningSetup(actors, effects).createMachine({
    id: 'provisioning',
    context: ({ input }) => ({
      config: input?.config ?? DEFAULT_CONFIG,
      startup: input?.startup ?? {},
      extraGroups: input?.groups ?? [],
      vmId: ZERO_VM_ID,
      metadata: null,
      media: null,
      mediaFailure: null,
      imdsFailure: null,
      certificatesFailure: null,
      imdsRetries: 0,
      plan: null,
      hostKeysLater: [],
      failure: null,
      reportFailure: null,
      terminating: false,
      kvpStopped: false,
      warnings: [],
      ppsType: 'None',
      reprovision: null,
      pollAttempts: 0,
      pollError: null,
      nic: null,
      nicsTried: [],
      leaseNic: null,
    }),
    invoke: { id: 'kvp', src: 'kvpWriter', onError: { actions: { type: 'recordKvpFailure', params: withError } } },
    // The final state the run ended in says how; a run that has not ended has failed unreported.
    output: ({ context, event }) => outputOf(context, (event.output as RunEnd | undefined) ?? { result: 'failed', reported: false }),
    on: { TERMINATE: { target: '.reportingFailure', actions: 'recordTerminated' } },
    initial: 'starting',
    states: {
      starting,
      provisioning,
      preprovisioned,
      completingHostKeys,
      reportingReady,
      markingProvisioned,
      reportingFailure,
      ...finals,
    },
  });

export type ProvisioningMachine = ReturnType<typeof createProvisioningMachine>;
export { PLACEHOLDER_ACTORS, type ProvisioningActors, type ProvisioningEffects } from './setup.js';
export { IMDS_HEAD_START_MS } from './head-start.js';
export type * from './types.js';
