/**
 * The first-boot provisioning statechart: the whole control flow of `bootstate provision`.
 *
 * config → VM id → marker → (InProgress report ‖ host keys ‖ metadata → validation → OS → configured) → report
 * pending → Ready → marker, and from anywhere: → ProvisioningFailed. systemd hears READY=1 once the OS is configured
 * (`configured`), on entering the failure report, and at the ends that provision nothing, so logins never wait for a
 * report; host keys sshd can take while it runs (rsa) are made after READY=1, and only the reports wait for them. A pre-provisioned pool VM leaves the metadata stage for `preprovisioned`
 * (Ready to the pool → marker → poll `reprovisiondata`) and comes back to `provisioning` with the customer's data. Health is a tag of the state that reports it. Retries, backoff and total
 * deadlines are states and `after` delays: leaving a state aborts its actor, so a deadline holds whatever a server
 * does. Nothing here performs I/O; every actor is a named placeholder that `src/provision.ts` replaces with the real ones.
 */
import { assign, enqueueActions, fromCallback, fromPromise, or, setup, stateIn, type DoneActorEvent, type ErrorActorEvent } from 'xstate';
import { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, type Health } from '../src/azure/health.js';
import { ZERO_VM_ID } from '../src/core/metadata.js';
import type { InstanceMetadata, MediaMetadata } from '../src/core/metadata.js';
import { poolType, normalizePpsType, pollErrorKind } from '../src/azure/pps.js';
import { DEFAULT_CONFIG, type Config, type StepName } from '../src/config/defaults.js';
import { failure, toFailure, type Failure } from '../src/core/errors.js';
import type { HostKeyType } from '../src/os/host-keys.js';
import type { MarkerState } from '../src/os/provisioner.js';
import type { PlatformCheck } from '../src/os/platform.js';

export { HEALTH_FAILED, HEALTH_IN_PROGRESS, HEALTH_READY, ZERO_VM_ID, type Health };

/** What provisioning will apply, resolved from IMDS (or the provisioning media). No secrets. */
export interface ProvisioningPlan {
  source: 'imds' | 'media';
  username: string;
  hostname: string;
  groups: string[];
  sshKeys: string[];
  passwordAuthentication: boolean;
  passwordProvided: boolean;
  /** The platform says the VM owner gave custom data (IMDS `extended.compute.hasCustomData`). */
  hasCustomData: boolean;
  /** Custom data arrived in ovf-env.xml. */
  customDataFound: boolean;
}

export interface ProvisioningOutput {
  /** `waiting-for-reuse`: a pool VM stopped (SIGTERM) while waiting; its next boot resumes the wait. */
  /** `not-on-azure`: the machine is not an Azure VM (src/os/platform.ts); nothing was provisioned or sent. */
  result: 'provisioned' | 'already-provisioned' | 'waiting-for-reuse' | 'not-on-azure' | 'failed';
  exitCode: number;
  reason?: string;
  code?: string;
  /** Whether the final health report was accepted by the wireserver. */
  reported: boolean;
}

export interface ProvisioningContext {
  config: Config;
  /** Groups from `--groups`, merged over the configured ones. */
  extraGroups: string[];
  vmId: string;
  metadata: InstanceMetadata | null;
  media: MediaMetadata | null;
  /** Why the provisioning media could not be used; validation decides whether that fails the run. */
  mediaFailure: Failure | null;
  imdsFailure: Failure | null;
  /** Host key types the host key step left for the background (sshd reads them per connection). */
  hostKeysLater: HostKeyType[];
  plan: ProvisioningPlan | null;
  failure: Failure | null;
  /** The error that kept the final report from being accepted. */
  reportFailure: Failure | null;
  terminating: boolean;
  /** The KVP writer failed and left: reports still go over HTTP, without their KVP record. */
  kvpStopped: boolean;
  warnings: string[];
  /** The preprovisioning type carried in every encoded report (`None` for an ordinary VM). */
  ppsType: string;
  /** The customer's ovf-env.xml, once a pool VM has been claimed (`reprovisiondata`). */
  reprovision: MediaMetadata | null;
  /** Failed polls of `reprovisiondata` so far, and the kind of the last one: the logging policy reads them. */
  pollAttempts: number;
  pollError: string | null;
  /** Set by the final state the run ends in. */
  end: { result: ProvisioningOutput['result']; reported: boolean } | null;
}

export interface ProvisioningInput {
  config?: Config;
  groups?: string[];
}

export type ProvisioningEvent = { type: 'TERMINATE' };

/**
 * What the chart tells the service manager (the root-level `systemd` actor): `systemd.ready` the moment nothing a
 * login needs is still to come — the OS is configured, or provisioning is over without configuring it — so sshd and
 * user sessions, ordered after the unit, start while the report is still being delivered.
 */
export type SystemdEvent = { type: 'systemd.ready' };

/** Events the chart sends to the root-level KVP writer. */
export type KvpEvent =
  | { type: 'kvp.report'; health: typeof HEALTH_READY | typeof HEALTH_FAILED; vmId: string; failure: Failure | null; ppsType: string };

/** Plain input of each actor, taken from context. */
export interface ReportInput {
  config: Config;
  vmId: string;
  health: Health;
  failure: Failure | null;
  ppsType: string;
}

/** Input of one poll of `reprovisiondata`: which attempt this is and how the previous one failed. */
export interface PollInput {
  config: Config;
  attempt: number;
  previousError: string | null;
}

export interface ConfigInput {
  config: Config;
}
/** The host key types made in the background. */
export interface HostKeysInput extends ConfigInput {
  types: HostKeyType[];
}
export interface MarkerInput {
  config: Config;
  vmId: string;
}
/** The media is read once more after a pool VM is claimed, for the customer's document only. */
export interface MediaInput extends ConfigInput {
  claimed: boolean;
}
export interface PlanInput {
  config: Config;
  plan: ProvisioningPlan;
}
/** Validation also decides whether unreadable provisioning media fails the run. */
export interface ValidateInput extends PlanInput {
  mediaFailure: Failure | null;
}

/**
 * What is done once everything that can change the plan has arrived (after gathering, or after the Guest Proxy
 * Agent said it is ready): a pool VM waits, a refused one fails, the rest is validated.
 */
const DECISIONS = [
  { guard: 'poolRunning', target: '#provisioning.preprovisioned', actions: 'recordPoolType' },
  { guard: 'poolUnsupported', target: '#provisioning.reportingFailure', actions: 'recordPoolUnsupported' },
  { guard: 'poolAfterClaim', target: '#provisioning.reportingFailure', actions: 'recordPoolAfterClaim' },
  { guard: 'havePlan', target: '#provisioning.provisioning.work.validating', actions: 'recordPlan' },
  { target: '#provisioning.reportingFailure', actions: 'recordNoMetadata' },
] as const;

/** A named actor that `src/provision.ts` replaces with the real one: the chart itself performs no I/O. */
const placeholder = <Out, In = void>(name: string) =>
  fromPromise<Out, In>(async () => {
    throw new Error(`actor ${name} was not provided`);
  });

/** A duration as a timer delay, capped at 2^31−1 ms (beyond it the runtime fires after 1 ms). */
const seconds = (s: number) => Math.min(2 ** 31 - 1, Math.max(0, Math.round(s * 1000)));

function planFrom(context: ProvisioningContext): ProvisioningPlan | null {
  const { metadata: imds, config } = context;
  // Once claimed, the physical media still holds the pool's placeholder: only the customer's document counts.
  const media = context.reprovision ?? context.media;
  const hasCustomData = imds?.hasCustomData ?? false;
  const customDataFound = media?.customDataPresent ?? false;
  const groups = [...new Set([...config.user_provisioners.groups, ...context.extraGroups])];
  const passwordProvided = media?.passwordProvided ?? false;
  if (imds) {
    return {
      source: 'imds',
      username: imds.adminUsername,
      hostname: imds.computerName,
      groups,
      sshKeys: imds.publicKeys,
      passwordAuthentication: !imds.disablePasswordAuthentication,
      passwordProvided,
      hasCustomData,
      customDataFound,
    };
  }
  if (media?.username) {
    return {
      source: 'media',
      username: media.username,
      hostname: media.hostname ?? '',
      groups,
      sshKeys: media.publicKeys,
      passwordAuthentication: media.disablePasswordAuthentication === null ? passwordProvided : !media.disablePasswordAuthentication,
      passwordProvided,
      hasCustomData,
      customDataFound,
    };
  }
  return null;
}

function noMetadataFailure(context: ProvisioningContext): Failure {
  const imds = context.imdsFailure ?? failure('IMDS_FAILED', [['error', 'no instance metadata']]);
  // IMDS failed, so the media was needed: when it was there but unusable, that is the precise reason.
  const media = context.mediaFailure;
  if (media && (media.code === 'OVF_INVALID' || media.code === 'PASSWORD_TOO_LONG')) return { ...media, data: [...media.data, ...imds.data] };
  if (context.media && !context.media.username) {
    return failure('USERNAME_UNKNOWN', [['error', 'IMDS failed and the provisioning media has no UserName'], ...imds.data]);
  }
  return imds;
}

/** The pool type of a VM not yet claimed; after the claim the pool is behind it. */
const unclaimedPool = (context: ProvisioningContext) =>
  context.reprovision === null ? poolType(context.metadata?.ppsType, context.media?.ppsType) : null;

/** The run's output, from the final state it ended in and the failure that ended it. */
function outputOf(context: ProvisioningContext): ProvisioningOutput {
  const { result, reported } = context.end ?? { result: 'failed', reported: false };
  const f = context.failure ?? context.reportFailure;
  if (result !== 'failed' || !f) return { result, exitCode: 0, reported };
  return { result, exitCode: f.exitCode, reason: f.reason, code: f.code, reported };
}

/** Every actor the chart invokes, as a named placeholder; `src/actors/provisioning.ts` has the real ones. */
const PLACEHOLDER_ACTORS = {
  kvpWriter: fromCallback<KvpEvent>(() => undefined),
  systemdNotifier: fromCallback<SystemdEvent>(() => undefined),
  loadConfig: placeholder<Config>('loadConfig'),
  checkPlatform: placeholder<PlatformCheck, ConfigInput>('checkPlatform'),
  readVmId: placeholder<string>('readVmId'),
  checkMarker: placeholder<MarkerState, MarkerInput>('checkMarker'),
  reportHealth: placeholder<void, ReportInput>('reportHealth'),
  fetchMetadata: placeholder<InstanceMetadata, ConfigInput>('fetchMetadata'),
  readMedia: placeholder<MediaMetadata | null, MediaInput>('readMedia'),
  validatePlan: placeholder<ProvisioningPlan, ValidateInput>('validatePlan'),
  setHostname: placeholder<void, PlanInput>('setHostname'),
  publishHostname: placeholder<void, PlanInput>('publishHostname'),
  createUser: placeholder<void, PlanInput>('createUser'),
  setPassword: placeholder<void, PlanInput>('setPassword'),
  writeSshKeys: placeholder<void, PlanInput>('writeSshKeys'),
  configureSshd: placeholder<void, PlanInput>('configureSshd'),
  regenerateHostKeys: placeholder<HostKeyType[], ConfigInput>('regenerateHostKeys'),
  addHostKeys: placeholder<void, HostKeysInput>('addHostKeys'),
  checkProxyAgent: placeholder<void, ConfigInput>('checkProxyAgent'),
  markReportPending: placeholder<void, MarkerInput>('markReportPending'),
  markProvisioned: placeholder<void, MarkerInput>('markProvisioned'),
  saveCustomData: placeholder<void, PlanInput>('saveCustomData'),
  markWaitingForReuse: placeholder<void, MarkerInput>('markWaitingForReuse'),
  pollReprovisionData: placeholder<MediaMetadata, PollInput>('pollReprovisionData'),
};

export type ProvisioningActors = typeof PLACEHOLDER_ACTORS;

/**
 * Builds the chart, StateNode tree included, on each call. `actors` replace the placeholders of the same names as
 * `provide` would, so a run builds the tree once with its real actors instead of a second time in `provide`.
 */
export const createProvisioningMachine = (actors: Partial<ProvisioningActors> = {}) => setup({
  types: {
    context: {} as ProvisioningContext,
    events: {} as ProvisioningEvent,
    input: {} as ProvisioningInput,
    output: {} as ProvisioningOutput,
    tags: {} as Health,
  },
  actors: { ...PLACEHOLDER_ACTORS, ...actors },
  guards: {
    configFailed: ({ context }) => context.failure !== null,
    terminating: ({ context }) => context.terminating,
    markerProvisioned: (_, params: { state: string }) => params.state === 'provisioned',
    markerReportPending: (_, params: { state: string }) => params.state === 'report-pending',
    markerWaitingForReuse: (_, params: { state: string }) => params.state === 'waiting-for-reuse',
    /** A pool VM of the type this agent serves: report Ready to the pool and wait to be claimed. */
    poolRunning: ({ context }) => unclaimedPool(context)?.type === 'Running',
    /** A pool type this agent cannot serve: never provision the placeholder identity. */
    poolUnsupported: ({ context }) => {
      const type = unclaimedPool(context)?.type;
      return type !== undefined && type !== 'None' && type !== 'Running';
    },
    /** Claimed, yet IMDS still calls the VM pre-provisioned: its data cannot be trusted to be the customer's. */
    poolAfterClaim: ({ context }) => context.reprovision !== null && normalizePpsType(context.metadata?.ppsType) !== 'None',
    stepSkipped: ({ context }, params: { step: StepName }) => context.config.steps.skip.includes(params.step),
    /** This VM's own host keys are in place (or their step is left out): sshd's drop-in may be proved now. */
    hostKeysReplaced: or([
      stateIn('#provisioning.provisioning.hostKeys.waiting'),
      stateIn('#provisioning.provisioning.hostKeys.adding'),
      stateIn('#provisioning.provisioning.hostKeys.done'),
    ]),
    /** READY=1 was sent: what is left may now take the CPU. */
    osConfigured: stateIn('#provisioning.provisioning.work.configured'),
    /** Every host key is in place, those made after READY included. */
    hostKeysComplete: stateIn('#provisioning.provisioning.hostKeys.done'),
    /** The host key step left types for the background. */
    hostKeysLeft: (_, params: { later: HostKeyType[] | undefined }) => (params.later?.length ?? 0) > 0,
    retryable: (_, params: { error: unknown }) => toFailure(params.error).retryable,
    havePlan: ({ context }) => planFrom(context) !== null,
    notOnAzure: (_, params: { check: PlatformCheck }) => !params.check.onAzure,
    /** The configuration requires the Guest Proxy Agent, or the media of this run (the customer's, once claimed) asks for it. */
    proxyAgentWanted: ({ context }) =>
      context.config.azure_proxy_agent.require ||
      (context.config.azure_proxy_agent.enable && (context.reprovision ?? context.media)?.provisionGuestProxyAgent === true),
  },
  delays: {
    imdsRetryInterval: ({ context }) => seconds(context.config.imds.retry_interval_secs),
    imdsTotalTimeout: ({ context }) => seconds(context.config.imds.total_retry_timeout_secs),
    /** Local work has a deadline too: a hung file system or command must not hold the first boot forever. */
    osTimeout: ({ context }) => seconds(context.config.os.timeout_secs),
    mediaTimeout: ({ context }) => seconds(context.config.provisioning_media.timeout_secs),
    /** The agent's own --wait, and a little more for the command itself. */
    proxyAgentTimeout: ({ context }) => seconds(context.config.azure_proxy_agent.wait_secs + 10),
    hostnamePublishTimeout: ({ context }) => seconds(context.config.hostname_publishing.timeout_secs),
    /** Once terminating, retries come quickly so one more attempt fits the short budget. */
    wireserverRetryInterval: ({ context }) =>
      context.terminating ? Math.min(200, seconds(context.config.wireserver.retry_interval_secs)) : seconds(context.config.wireserver.retry_interval_secs),
    wireserverTotalTimeout: ({ context }) => seconds(context.config.wireserver.total_retry_timeout_secs),
    reprovisionPollInterval: ({ context }) => seconds(context.config.preprovisioning.poll_interval_secs),
    /** On SIGTERM the failure report gets a short budget so the agent exits within 2 s. */
    failureReportTimeout: ({ context }) =>
      context.terminating ? 1500 : seconds(context.config.wireserver.total_retry_timeout_secs),
  },
  actions: {
    recordFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordImdsFailure: assign({ imdsFailure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordImdsTimeout: assign({
      imdsFailure: ({ context }) =>
        failure('TIMEOUT', [
          ['error', `IMDS did not answer usefully within ${context.config.imds.total_retry_timeout_secs} s`],
          ...(context.imdsFailure ? ([['last_error', context.imdsFailure.reason]] as [string, string][]) : []),
        ]),
    }),
    recordReportFailure: assign({ reportFailure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordReportTimeout: assign({
      reportFailure: ({ context }) =>
        failure('TIMEOUT', [
          ['error', `the wireserver did not accept the report within ${context.config.wireserver.total_retry_timeout_secs} s`],
          ...(context.reportFailure ? ([['last_error', context.reportFailure.reason]] as [string, string][]) : []),
        ]),
    }),
    recordOsTimeout: assign({
      failure: ({ context }, params: { phase: string }) =>
        failure('TIMEOUT', [
          ['error', `${params.phase} did not finish within ${context.config.os.timeout_secs} s`],
          ['phase', params.phase],
        ]),
    }),
    recordProxyAgentTimeout: assign({
      failure: ({ context }) =>
        failure('PROXY_AGENT_STATUS_FAILURE', [['error', `no answer within ${context.config.azure_proxy_agent.wait_secs + 10} s`]]),
    }),
    /** Publishing the hostname is best effort: its failure is a warning, never the run's failure. */
    recordHostKeysLate: assign({
      warnings: ({ context }) => [
        ...context.warnings,
        `ssh host keys ${context.hostKeysLater.join(', ')} not made within ${context.config.os.timeout_secs} s; sshd offers the others`,
      ],
    }),
    recordHostKeysFailure: assign({
      warnings: ({ context }, params: { error: unknown }) => [...context.warnings, `ssh host keys ${context.hostKeysLater.join(', ')} not made: ${toFailure(params.error).reason}`],
    }),
    recordPublishFailure: assign({
      warnings: ({ context }, params: { error: unknown }) => [...context.warnings, `hostname not published: ${toFailure(params.error).reason}`],
    }),
    recordPublishTimeout: assign({
      warnings: ({ context }) => [
        ...context.warnings,
        `hostname not published: no answer within ${context.config.hostname_publishing.timeout_secs} s`,
      ],
    }),
    recordPlatformUnknown: assign({
      warnings: ({ context }, params: { error: unknown }) => [...context.warnings, `platform check failed: ${toFailure(params.error).reason}; provisioning goes on`],
    }),
    /** Read no further: the plan is made without the media, and the warning says so. */
    recordMediaAbandoned: assign({
      warnings: ({ context }) => [
        ...context.warnings,
        `provisioning media: not read within ${context.config.provisioning_media.timeout_secs} s; provisioning goes on without it`,
      ],
    }),
    recordNoMetadata: assign({ failure: ({ context }) => noMetadataFailure(context) }),
    recordPlan: assign({ plan: ({ context }) => planFrom(context) }),
    recordPoolType: assign({ ppsType: ({ context }) => unclaimedPool(context)?.type ?? context.ppsType }),
    recordPoolUnsupported: assign(({ context }) => {
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
    recordPoolAfterClaim: assign({
      failure: ({ context }) =>
        failure('IMDS_INVALID', [
          ['key', 'extended.compute.ppsType'],
          ['value', context.metadata?.ppsType ?? ''],
          ['error', 'IMDS still reports a preprovisioning type after the VM was claimed'],
        ]),
    }),
    recordPoolReadyFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordPoolReadyTimeout: assign({
      failure: ({ context }) =>
        failure('TIMEOUT', [['error', `the wireserver did not accept the pool's Ready within ${context.config.wireserver.total_retry_timeout_secs} s`]]),
    }),
    recordPollFailure: assign({
      pollAttempts: ({ context }) => context.pollAttempts + 1,
      pollError: (_, params: { error: unknown }) => pollErrorKind(toFailure(params.error)),
    }),
    /** The customer's document replaces everything the pool VM was given; the next pass reads IMDS afresh. */
    recordClaim: assign({
      reprovision: (_, params: { media: MediaMetadata }) => params.media,
      metadata: null,
      media: null,
      mediaFailure: null,
      imdsFailure: null,
      plan: null,
      hostKeysLater: [],
      pollAttempts: 0,
      pollError: null,
    }),
    recordResumedWait: assign({ ppsType: 'Running' }),
    recordReadyTerminated: assign({
      terminating: true,
      reportFailure: () => failure('TERMINATED', [['error', 'received SIGTERM while reporting Ready']]),
    }),
    recordTerminated: assign({
      terminating: true,
      failure: ({ context }) => context.failure ?? failure('TERMINATED', [['error', 'received SIGTERM']]),
    }),
    /** Sent before the HTTP report starts, so the host hears the outcome even when HTTP fails. */
    writeReportToKvp: enqueueActions(({ context, enqueue }, params: { health: typeof HEALTH_READY | typeof HEALTH_FAILED }) => {
      if (context.kvpStopped) return;
      enqueue.sendTo('kvp', {
        type: 'kvp.report' as const,
        health: params.health,
        vmId: context.vmId,
        failure: params.health === HEALTH_FAILED ? context.failure : null,
        ppsType: context.ppsType,
      });
    }),
    /** Logins may start: READY=1 (the notifier sends it once, however often it is told). */
    tellSystemdReady: enqueueActions(({ enqueue }) => {
      enqueue.sendTo('systemd', { type: 'systemd.ready' as const });
    }),
    /** Entered a final state: how the run ended, and whether the fabric accepted its last report. */
    recordEnd: assign({ end: (_, params: NonNullable<ProvisioningContext['end']>) => params }),
    recordKvpFailure: assign({
      kvpStopped: true,
      warnings: ({ context }, params: { error: unknown }) => [...context.warnings, `kvp writer stopped: ${toFailure(params.error).reason}`],
    }),
  },
}).createMachine({
  id: 'provisioning',
  context: ({ input }) => ({
    config: input?.config ?? DEFAULT_CONFIG,
    extraGroups: input?.groups ?? [],
    vmId: ZERO_VM_ID,
    metadata: null,
    media: null,
    mediaFailure: null,
    imdsFailure: null,
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
    end: null,
  }),
  invoke: [
    {
      id: 'kvp',
      src: 'kvpWriter',
      onError: { actions: { type: 'recordKvpFailure', params: ({ event }) => ({ error: event.error }) } },
    },
    { id: 'systemd', src: 'systemdNotifier' },
  ],
  output: ({ context }) => outputOf(context),
  on: {
    TERMINATE: { target: '.reportingFailure', actions: 'recordTerminated' },
  },
  initial: 'loadingConfig',
  states: {
    loadingConfig: {
      invoke: {
        id: 'config',
        src: 'loadConfig',
        onDone: { target: 'checkingPlatform', actions: assign({ config: ({ event }) => event.output }) },
        onError: { target: 'checkingPlatform', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    // Off Azure there is no fabric to provision from or report to: the run ends before the first request.
    checkingPlatform: {
      invoke: {
        id: 'platform',
        src: 'checkPlatform',
        input: ({ context }) => ({ config: context.config }),
        onDone: [
          { guard: { type: 'notOnAzure', params: ({ event }) => ({ check: event.output }) }, target: 'notOnAzure' },
          { target: 'readingVmId' },
        ],
        // A check that cannot decide must not keep an Azure VM from being provisioned.
        onError: { target: 'readingVmId', actions: { type: 'recordPlatformUnknown', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    readingVmId: {
      invoke: {
        id: 'vmId',
        src: 'readVmId',
        onDone: [
          { guard: 'configFailed', target: 'reportingFailure', actions: assign({ vmId: ({ event }) => event.output }) },
          { target: 'checkingMarker', actions: assign({ vmId: ({ event }) => event.output }) },
        ],
        onError: { target: 'reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    checkingMarker: {
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
        onError: { target: 'reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    provisioning: {
      type: 'parallel',
      tags: [HEALTH_IN_PROGRESS],
      // `work` before `hostKeys` before `inProgress`: regions start their actors in document order, so the IMDS
      // request, which Ready waits on, leaves first, and the in-progress report, which nothing waits on, last.
      states: {
        work: {
          initial: 'gathering',
          states: {
            gathering: {
              type: 'parallel',
              onDone: [{ guard: 'proxyAgentWanted', target: 'checkingProxyAgent' }, ...DECISIONS],
              states: {
                imds: {
                  initial: 'fetching',
                  states: {
                    fetching: {
                      initial: 'requesting',
                      after: { imdsTotalTimeout: { target: 'timedOut', actions: 'recordImdsTimeout' } },
                      states: {
                        requesting: {
                          invoke: {
                            id: 'imds',
                            src: 'fetchMetadata',
                            input: ({ context }) => ({ config: context.config }),
                            onDone: {
                              target: '#provisioning.provisioning.work.gathering.imds.fetched',
                              actions: assign({ metadata: ({ event }) => event.output, imdsFailure: null }),
                            },
                            onError: [
                              {
                                guard: { type: 'retryable', params: ({ event }) => ({ error: event.error }) },
                                target: 'backoff',
                                actions: { type: 'recordImdsFailure', params: ({ event }) => ({ error: event.error }) },
                              },
                              {
                                target: '#provisioning.provisioning.work.gathering.imds.failed',
                                actions: { type: 'recordImdsFailure', params: ({ event }) => ({ error: event.error }) },
                              },
                            ],
                          },
                        },
                        backoff: { after: { imdsRetryInterval: 'requesting' } },
                      },
                    },
                    fetched: { type: 'final' },
                    failed: { type: 'final' },
                    timedOut: { type: 'final' },
                  },
                },
                // The media is always waited for: besides the password it carries pool flags and CustomData, which
                // IMDS may not mention, so an answer that arrives second must change the plan as one that arrives
                // first would. Its own short deadline keeps a wedged device from holding the run.
                media: {
                  initial: 'reading',
                  states: {
                    reading: {
                      after: { mediaTimeout: { target: 'abandoned', actions: 'recordMediaAbandoned' } },
                      invoke: {
                        id: 'media',
                        src: 'readMedia',
                        input: ({ context }) => ({ config: context.config, claimed: context.reprovision !== null }),
                        onDone: { target: 'read', actions: assign({ media: ({ event }) => event.output }) },
                        onError: {
                          target: 'unreadable',
                          actions: assign({
                            warnings: ({ context, event }) => [...context.warnings, `provisioning media: ${toFailure(event.error).reason}`],
                            mediaFailure: ({ event }) => toFailure(event.error),
                          }),
                        },
                      },
                    },
                    read: { type: 'final' },
                    unreadable: { type: 'final' },
                    abandoned: { type: 'final' },
                  },
                },
              },
            },
            // The media (or the configuration) asks for Azure's Guest Proxy Agent: nothing goes on until it is ready.
            checkingProxyAgent: {
              after: { proxyAgentTimeout: { target: '#provisioning.reportingFailure', actions: 'recordProxyAgentTimeout' } },
              invoke: {
                id: 'proxyAgent',
                src: 'checkProxyAgent',
                input: ({ context }) => ({ config: context.config }),
                onDone: [...DECISIONS],
                onError: { target: '#provisioning.reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
              },
            },
            validating: {
              after: {
                osTimeout: { target: '#provisioning.reportingFailure', actions: { type: 'recordOsTimeout', params: { phase: 'validation' } } },
              },
              invoke: {
                id: 'validate',
                src: 'validatePlan',
                input: ({ context }) => ({ config: context.config, plan: context.plan!, mediaFailure: context.mediaFailure }),
                onDone: { target: 'configuringOs', actions: assign({ plan: ({ event }) => event.output }) },
                onError: { target: '#provisioning.reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
              },
            },
            configuringOs: {
              type: 'parallel',
              onDone: 'configured',
              after: {
                osTimeout: { target: '#provisioning.reportingFailure', actions: { type: 'recordOsTimeout', params: { phase: 'OS configuration' } } },
              },
              states: {
                hostname: {
                  initial: 'setting',
                  states: {
                    // A skipped hostname step is not published either.
                    setting: osStep('hostname', 'setHostname', 'publishing', 'hostname', 'done'),
                    // Azure DNS learns the name from the next DHCP request: make the client send one now.
                    publishing: {
                      after: { hostnamePublishTimeout: { target: 'done', actions: 'recordPublishTimeout' } },
                      invoke: {
                        id: 'hostnamePublish',
                        src: 'publishHostname',
                        input: ({ context }) => ({ config: context.config, plan: context.plan! }),
                        onDone: 'done',
                        onError: { target: 'done', actions: { type: 'recordPublishFailure', params: ({ event }) => ({ error: event.error }) } },
                      },
                    },
                    done: { type: 'final' },
                  },
                },
                account: {
                  initial: 'creatingUser',
                  states: {
                    creatingUser: osStep('user', 'createUser', 'credentials', 'user'),
                    // The password lives in /etc/shadow, the keys in the home: once the user exists, neither waits.
                    credentials: {
                      type: 'parallel',
                      onDone: 'done',
                      states: {
                        password: {
                          initial: 'setting',
                          states: {
                            setting: osStep('password', 'setPassword', 'done', 'password'),
                            done: { type: 'final' },
                          },
                        },
                        sshKeys: {
                          initial: 'writing',
                          states: {
                            writing: osStep('sshKeys', 'writeSshKeys', 'done', 'ssh-keys'),
                            done: { type: 'final' },
                          },
                        },
                      },
                    },
                    done: { type: 'final' },
                  },
                },
                // The drop-in's `sshd -T` proof must not run while the image's host keys are gone and this VM's not yet in.
                sshd: {
                  initial: 'awaitingHostKeys',
                  states: {
                    awaitingHostKeys: { always: { guard: 'hostKeysReplaced', target: 'configuring' } },
                    configuring: osStep('sshd', 'configureSshd', 'done', 'sshd'),
                    done: { type: 'final' },
                  },
                },
                customData: {
                  initial: 'saving',
                  states: {
                    saving: osStep('customData', 'saveCustomData', 'done', 'custom-data'),
                    done: { type: 'final' },
                  },
                },
              },
            },
            // Everything a login needs is in place: systemd hears READY=1 and starts sshd. Host keys left for the
            // background (sshd reads them per connection) are made now; the reports wait for them, logins do not.
            configured: {
              entry: 'tellSystemdReady',
              always: { guard: 'hostKeysComplete', target: '#provisioning.markingReportPending' },
              after: { osTimeout: { target: '#provisioning.markingReportPending', actions: 'recordHostKeysLate' } },
            },
          },
        },
        // The image's host keys are the captured machine's; this VM's own depend on nothing IMDS or the media say, so
        // they are made while the metadata is fetched, off sshd's critical path. A pool VM makes them again once claimed.
        hostKeys: {
          initial: 'replacing',
          states: {
            replacing: {
              always: { guard: { type: 'stepSkipped', params: { step: 'host-keys' } }, target: 'done' },
              invoke: {
                id: 'hostKeys',
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
                onError: { target: '#provisioning.reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
              },
            },
            // Types sshd can take while it runs (rsa by default, the slow one): sshd's drop-in and READY=1 do not wait
            // for them, and they are made once READY=1 was sent, so their CPU never delays it.
            waiting: { always: { guard: 'osConfigured', target: 'adding' } },
            adding: {
              invoke: {
                id: 'laterHostKeys',
                src: 'addHostKeys',
                input: ({ context }) => ({ config: context.config, types: context.hostKeysLater }),
                onDone: 'done',
                onError: { target: 'done', actions: { type: 'recordHostKeysFailure', params: ({ event }) => ({ error: event.error }) } },
              },
            },
            done: { type: 'final' },
          },
        },
        inProgress: {
          initial: 'sending',
          states: {
            sending: {
              invoke: {
                id: 'inProgressReport',
                src: 'reportHealth',
                input: ({ context }) => ({ config: context.config, vmId: context.vmId, health: HEALTH_IN_PROGRESS, failure: null, ppsType: context.ppsType }),
                onDone: 'sent',
                onError: [
                  { guard: { type: 'retryable', params: ({ event }) => ({ error: event.error }) }, target: 'backoff' },
                  { target: 'abandoned' },
                ],
              },
            },
            backoff: { after: { wireserverRetryInterval: 'sending' } },
            sent: { type: 'final' },
            abandoned: { type: 'final' },
          },
        },
      },
    },
    /**
     * A pool VM (PPS type Running): Ready goes to the pool, a durable marker records it, then `reprovisiondata` is
     * polled with no deadline until the customer's ovf-env.xml arrives; provisioning then starts again with it.
     */
    preprovisioned: {
      tags: [HEALTH_READY],
      initial: 'reportingPoolReady',
      states: {
        reportingPoolReady: {
          entry: { type: 'writeReportToKvp', params: { health: HEALTH_READY } },
          initial: 'requesting',
          after: { wireserverTotalTimeout: { target: '#provisioning.reportingFailure', actions: 'recordPoolReadyTimeout' } },
          states: {
            requesting: {
              invoke: {
                id: 'poolReadyReport',
                src: 'reportHealth',
                input: ({ context }) => ({ config: context.config, vmId: context.vmId, health: HEALTH_READY, failure: null, ppsType: context.ppsType }),
                onDone: '#provisioning.preprovisioned.markingWaiting',
                onError: [
                  { guard: { type: 'retryable', params: ({ event }) => ({ error: event.error }) }, target: 'backoff' },
                  { target: '#provisioning.reportingFailure', actions: { type: 'recordPoolReadyFailure', params: ({ event }) => ({ error: event.error }) } },
                ],
              },
            },
            backoff: { after: { wireserverRetryInterval: 'requesting' } },
          },
        },
        markingWaiting: {
          invoke: {
            id: 'waitingMarker',
            src: 'markWaitingForReuse',
            input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
            onDone: 'waiting',
            onError: { target: '#provisioning.reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
          },
        },
        waiting: {
          initial: 'polling',
          // The pool's Ready stands and the marker is down: stop quietly, the next boot waits again.
          on: { TERMINATE: '#provisioning.waitingInterrupted' },
          states: {
            polling: {
              invoke: {
                id: 'reprovision',
                src: 'pollReprovisionData',
                input: ({ context }) => ({ config: context.config, attempt: context.pollAttempts + 1, previousError: context.pollError }),
                onDone: { target: '#provisioning.provisioning', actions: { type: 'recordClaim', params: ({ event }) => ({ media: event.output }) } },
                onError: [
                  {
                    guard: { type: 'retryable', params: ({ event }) => ({ error: event.error }) },
                    target: 'pausing',
                    actions: { type: 'recordPollFailure', params: ({ event }) => ({ error: event.error }) },
                  },
                  { target: '#provisioning.reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
                ],
              },
            },
            pausing: { after: { reprovisionPollInterval: 'polling' } },
          },
        },
      },
    },
    markingReportPending: {
      invoke: {
        id: 'pendingMarker',
        src: 'markReportPending',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
        onDone: 'reportingReady',
        onError: { target: 'reportingFailure', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    reportingReady: {
      tags: [HEALTH_READY],
      // The OS is configured and the report-pending marker is down: logins no longer wait for anything.
      entry: ['tellSystemdReady', { type: 'writeReportToKvp', params: { health: HEALTH_READY } }],
      initial: 'requesting',
      after: { wireserverTotalTimeout: { target: 'readyNotAccepted', actions: 'recordReportTimeout' } },
      on: {
        // Provisioning is complete and the report-pending marker is down: the next boot reports Ready.
        TERMINATE: { target: 'readyNotAccepted', actions: 'recordReadyTerminated' },
      },
      states: finalReportStates('readyReport', HEALTH_READY, '#provisioning.markingProvisioned', '#provisioning.readyNotAccepted'),
    },
    markingProvisioned: {
      tags: [HEALTH_READY],
      // Ready was accepted; finishing the marker takes milliseconds, so SIGTERM waits for it.
      on: { TERMINATE: {} },
      invoke: {
        id: 'provisionedMarker',
        src: 'markProvisioned',
        input: ({ context }) => ({ config: context.config, vmId: context.vmId }),
        onDone: 'provisioned',
        onError: { target: 'markerNotWritten', actions: { type: 'recordFailure', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    reportingFailure: {
      tags: [HEALTH_FAILED],
      // Provisioning is over: whatever it left in place is what logins get, without waiting for the report.
      entry: ['tellSystemdReady', { type: 'writeReportToKvp', params: { health: HEALTH_FAILED } }],
      initial: 'requesting',
      after: { failureReportTimeout: { target: 'failedUnreported', actions: 'recordReportTimeout' } },
      on: {
        TERMINATE: [
          // The short budget counts from the first SIGTERM; later ones change nothing.
          { guard: 'terminating' },
          { target: 'reportingFailure', reenter: true, actions: 'recordTerminated' },
        ],
      },
      states: finalReportStates('failureReport', HEALTH_FAILED, '#provisioning.failed', '#provisioning.failedUnreported'),
    },
    provisioned: { type: 'final', tags: [HEALTH_READY], entry: { type: 'recordEnd', params: { result: 'provisioned', reported: true } } },
    alreadyProvisioned: { type: 'final', entry: ['tellSystemdReady', { type: 'recordEnd', params: { result: 'already-provisioned', reported: false } }] },
    notOnAzure: { type: 'final', entry: ['tellSystemdReady', { type: 'recordEnd', params: { result: 'not-on-azure', reported: false } }] },
    waitingInterrupted: { type: 'final', tags: [HEALTH_READY], entry: { type: 'recordEnd', params: { result: 'waiting-for-reuse', reported: true } } },
    readyNotAccepted: { type: 'final', tags: [HEALTH_READY], entry: { type: 'recordEnd', params: { result: 'failed', reported: false } } },
    markerNotWritten: { type: 'final', tags: [HEALTH_READY], entry: { type: 'recordEnd', params: { result: 'failed', reported: true } } },
    failed: { type: 'final', tags: [HEALTH_FAILED], entry: { type: 'recordEnd', params: { result: 'failed', reported: true } } },
    failedUnreported: { type: 'final', tags: [HEALTH_FAILED], entry: { type: 'recordEnd', params: { result: 'failed', reported: false } } },
  },
});

/**
 * One OS step: invoke the named actor with the plan; any error fails the run. A step left out by `--only`/`--skip`
 * (config `[steps] skip`) goes on to `skipTo` (default `next`) without starting its actor: the same chart, one
 * guarded transition.
 */
function osStep(
  id: string,
  src: 'setHostname' | 'createUser' | 'setPassword' | 'writeSshKeys' | 'configureSshd' | 'saveCustomData',
  next: string,
  step: StepName,
  skipTo = next,
) {
  return {
    always: { guard: { type: 'stepSkipped' as const, params: { step } }, target: skipTo },
    invoke: {
      id,
      src,
      input: ({ context }: { context: ProvisioningContext }) => ({ config: context.config, plan: context.plan! }),
      onDone: next,
      onError: {
        target: '#provisioning.reportingFailure',
        actions: { type: 'recordFailure' as const, params: ({ event }: { event: ErrorActorEvent }) => ({ error: event.error }) },
      },
    },
  };
}

/**
 * Attempts of a final report: request → (retryable error) backoff → request; accepted → `accepted`, refused →
 * `notAccepted`. The enclosing state owns the total deadline.
 */
function finalReportStates(
  id: 'readyReport' | 'failureReport',
  health: typeof HEALTH_READY | typeof HEALTH_FAILED,
  accepted: string,
  notAccepted: string,
) {
  const record = { type: 'recordReportFailure' as const, params: ({ event }: { event: ErrorActorEvent }) => ({ error: event.error }) };
  return {
    requesting: {
      invoke: {
        id,
        src: 'reportHealth' as const,
        input: ({ context }: { context: ProvisioningContext }) => ({
          config: context.config,
          vmId: context.vmId,
          health,
          failure: health === HEALTH_FAILED ? context.failure : null,
          ppsType: context.ppsType,
        }),
        onDone: accepted,
        onError: [
          { guard: { type: 'retryable' as const, params: ({ event }: { event: ErrorActorEvent }) => ({ error: event.error }) }, target: 'backoff', actions: record },
          { target: notAccepted, actions: record },
        ],
      },
    },
    backoff: { after: { wireserverRetryInterval: 'requesting' } },
  };
}

export type ProvisioningMachine = ReturnType<typeof createProvisioningMachine>;
export type { DoneActorEvent };
