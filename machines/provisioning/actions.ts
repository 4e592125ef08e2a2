/**
 * The provisioning chart's actions, by name: what each transition records in context, the KVP report it hands the
 * writer, and READY=1 (the chart's one direct effect). Context stays plain data: failures, strings, counts.
 */
import { assign, enqueueActions, type ParameterizedObject } from 'xstate';
import { HEALTH_FAILED } from '../../src/azure/health.js';
import { pollErrorKind } from '../../src/azure/pps.js';
import { describeFailure, failure, toFailure } from '../../src/core/errors.js';
import { ZERO_VM_ID, type MediaMetadata } from '../../src/core/metadata.js';
import { timedOut } from '../retry.js';
import type { ProvisioningActors } from './actors.js';
import { noMetadataFailure, planFrom, unclaimedPool, withCertificateKeys } from './plan.js';
import type * as T from './types.js';

type Ctx = T.ProvisioningContext;
type Ev = T.ProvisioningEvent;
type Params = ParameterizedObject['params'] | undefined;
/** The chart's actors as XState's action types name them. */
type Actor = { [K in keyof ProvisioningActors & string]: { src: K; logic: ProvisioningActors[K]; id: string | undefined } }[keyof ProvisioningActors & string];

/** `assign` typed for this chart, with the action's `params` as `P`. */
const set = <P extends Params = undefined>(assignment: Parameters<typeof assign<Ctx, Ev, P, Ev, Actor>>[0]) => assign<Ctx, Ev, P, Ev, Actor>(assignment);
/** `enqueueActions` typed for this chart, with the action's `params` as `P`. */
const queue = <P extends Params = undefined>(collect: Parameters<typeof enqueueActions<Ctx, Ev, P, Ev, Actor, never, never, never, never>>[0]) =>
  enqueueActions<Ctx, Ev, P, Ev, Actor, never, never, never, never>(collect);

/**
 * What the chart does to the world directly, not through an actor: READY=1 to the service manager. An action, not
 * a child actor, so that it happens even when the run ends in its first macrostep (a child is started only after
 * it, and a run that ends there stops its children first).
 */
export interface ProvisioningEffects {
  systemdReady?: () => void;
}

/** What was read before the chart, and the failures and warnings of the run. */
const runActions = {
  /** What was read before the chart: the VM id, the platform check that could not decide. */
  recordStartup: set(({ context }) => {
    const { platform, vmId } = context.startup;
    const unknown = platform && 'failure' in platform ? [`platform check failed: ${platform.failure.reason}; provisioning goes on`] : [];
    return { vmId: vmId ?? ZERO_VM_ID, warnings: [...context.warnings, ...unknown] };
  }),
  /** A config that failed to load, when the marker decides the boot anyway: a warning naming it, and what follows. */
  warnConfigFailed: set<{ then: string }>({
    warnings: ({ context }, params) => {
      const configFailure = context.startup.configFailure;
      return configFailure ? [...context.warnings, `${describeFailure(configFailure)}; ${params.then}`] : context.warnings;
    },
  }),
  /** The run fails: with the error an actor threw, or the failure a state built. */
  recordFailure: set<{ error: unknown }>({ failure: (_, params) => toFailure(params.error) }),
  /** Something went wrong that the run survives: a line for the log and the run's warnings. */
  warn: set<{ text: string }>({ warnings: ({ context }, params) => [...context.warnings, params.text] }),
  /** A stop once the OS is configured: Ready is left for the next boot, never turned into a failure. */
  recordReadyTerminated: set({
    terminating: true,
    reportFailure: () => failure('TERMINATED', [['error', 'received SIGTERM once the OS was configured; the next boot reports Ready']]),
  }),
  /** A stop while a pool VM's marker is written (its Ready accepted): the run ends once the marker is down. */
  recordPoolTerminating: set({ terminating: true }),
  recordTerminated: set({
    terminating: true,
    failure: ({ context }) => context.failure ?? failure('TERMINATED', [['error', 'received SIGTERM']]),
  }),
};

/** The failures of the retried requests: IMDS, the certificates, the reports. */
const retryActions = {
  recordImdsFailure: set<{ error: unknown }>({ imdsFailure: (_, params) => toFailure(params.error) }),
  /** A retryable IMDS error: the next attempt is a new request. */
  recordImdsRetry: set<{ error: unknown }>({
    imdsFailure: (_, params) => toFailure(params.error),
    imdsRetries: ({ context }) => context.imdsRetries + 1,
  }),
  recordImdsTimeout: set({
    imdsFailure: ({ context }) => timedOut(`IMDS did not answer usefully within ${context.config.imds.total_retry_timeout_secs} s`, context.imdsFailure),
  }),
  recordCertificatesRetry: set<{ error: unknown }>({ certificatesFailure: (_, params) => toFailure(params.error) }),
  recordReportFailure: set<{ error: unknown }>({ reportFailure: (_, params) => toFailure(params.error) }),
  recordReportTimeout: set({
    reportFailure: ({ context }) =>
      timedOut(`the wireserver did not accept the report within ${context.config.wireserver.total_retry_timeout_secs} s`, context.reportFailure),
  }),
};

/** The plan, and a pool VM's way through the pool. */
const planActions = {
  /** The keys the certificates gave join the plan's, for the SSH keys step. */
  recordCertificateKeys: set<{ keys: string[] }>({ plan: ({ context }, params) => withCertificateKeys(context.plan, params.keys) }),
  recordNoMetadata: set({ failure: ({ context }) => noMetadataFailure(context) }),
  recordPlan: set({ plan: ({ context }) => planFrom(context) }),
  recordPoolType: set({ ppsType: ({ context }) => unclaimedPool(context)?.type ?? context.ppsType }),
  recordPoolShutdownMissed: set(({ context }) => ({
    ppsType: 'PreprovisionedOSDisk',
    failure: failure('PPS_NOT_SHUT_DOWN', [
      ['error', 'an earlier boot reported Ready to the pool for an OS-disk pool VM, which the host then shuts down; this VM was started again instead'],
      ['pps_type', unclaimedPool(context)!.raw],
    ]),
  })),
  /** An attached NIC that was not the primary one: the next wait skips it. */
  recordNicTried: set(({ context }) => ({ nicsTried: context.nic ? [...context.nicsTried, context.nic.name] : context.nicsTried, nic: null })),
  recordPoolUnsupported: set(({ context }) => {
    const pool = unclaimedPool(context)!;
    return {
      ppsType: pool.type,
      failure: failure('PPS_UNSUPPORTED', [
        ['error', `preprovisioning type ${pool.raw} is not supported by this agent; the placeholder identity was not provisioned`],
        ['pps_type', pool.raw],
        ['source', pool.source],
      ]),
    };
  }),
  recordPollFailure: set<{ error: unknown }>({
    pollAttempts: ({ context }) => context.pollAttempts + 1,
    pollError: (_, params) => pollErrorKind(toFailure(params.error)),
  }),
  /** The customer's document replaces everything the pool VM was given; the next pass reads IMDS afresh. */
  recordClaim: set<{ media: MediaMetadata }>({
    reprovision: (_, params) => params.media,
    metadata: null,
    media: null,
    mediaFailure: null,
    imdsFailure: null,
    plan: null,
    hostKeysLater: [],
    imdsRetries: 0,
  }),
  /** The pool type a resumed wait reports: the reuse marker's name tells Savable from Running. */
  recordResumedWait: set<{ ppsType: string }>({ ppsType: (_, params) => params.ppsType }),
  /** The NIC a Savable VM polled through is gone: the wait for an attached one starts afresh. */
  recordNicGone: set({ nic: null, nicsTried: [] as string[] }),
};

/** The KVP writer's report and READY=1. */
const effectActions = (effects: ProvisioningEffects) => ({
  /** Sent before the HTTP report starts, so the host hears the outcome even when HTTP fails. */
  writeReportToKvp: queue<{ health: T.KvpEvent['health'] }>(({ context, enqueue }, params) => {
    if (context.kvpStopped) return;
    const report: T.KvpEvent = {
      type: 'kvp.report',
      health: params.health,
      vmId: context.vmId,
      failure: params.health === HEALTH_FAILED ? context.failure : null,
      ppsType: context.ppsType,
    };
    enqueue.sendTo('kvp', report);
  }),
  /** Logins may start: READY=1 (the notifier sends it once, however often it is told). */
  tellSystemdReady: queue(({ enqueue }) => {
    enqueue(() => effects.systemdReady?.());
  }),
  recordKvpFailure: set<{ error: unknown }>({
    kvpStopped: true,
    warnings: ({ context }, params) => [...context.warnings, `kvp writer stopped: ${toFailure(params.error).reason}`],
  }),
});

/** Every action of the chart, with `effects` done for real. */
export const actionsOf = (effects: ProvisioningEffects) => ({ ...runActions, ...retryActions, ...planActions, ...effectActions(effects) });
