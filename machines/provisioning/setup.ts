/**
 * The chart's vocabulary: every actor it invokes (as a named placeholder: the chart performs no I/O), every guard,
 * delay and action, by name. The state files build on `chart` (`chart.createStateConfig`), so each is typed against
 * exactly these names.
 */
import { assign, enqueueActions, not, or, setup, stateIn } from 'xstate';
import { PLACEHOLDER_ACTORS } from './actors.js';
import { HEALTH_FAILED, type Health } from '../../src/azure/health.js';
import { ZERO_VM_ID, type MediaMetadata } from '../../src/core/metadata.js';
import { normalizePpsType, pollErrorKind } from '../../src/azure/pps.js';
import type { StepName } from '../../src/config/defaults.js';
import { describeFailure, failure, toFailure } from '../../src/core/errors.js';
import type { HostKeyType } from '../../src/os/host-keys.js';
import { certificatesEssential, certificatesWanted, noMetadataFailure, planFrom, seconds, timedOut, unclaimedPool, withCertificateKeys } from './plan.js';
import type * as T from './types.js';

export type ProvisioningActors = typeof PLACEHOLDER_ACTORS;
export { PLACEHOLDER_ACTORS };

const WORK = '#provisioning.provisioning.work';
const HOST_KEYS = '#provisioning.provisioning.hostKeys';
const MEDIA = '#provisioning.provisioning.work.gathering.media';

/**
 * How long the media read and the host keys wait at most for the IMDS request to be written (`imds.sent`): a
 * connection that hangs must not hold them up.
 */
export const IMDS_HEAD_START_MS = 50;

/**
 * What the chart does to the world directly, not through an actor: READY=1 to the service manager. An action, not
 * a child actor, so that it happens even when the run ends in its first macrostep (a child is started only after
 * it, and a run that ends there stops its children first).
 */
export interface ProvisioningEffects {
  systemdReady?: () => void;
}

/**
 * The chart's setup; `actors` replace the placeholders of the same names and `effects` are the direct effects (a
 * run sets it up with the real ones).
 */
export const provisioningSetup = (actors: Partial<ProvisioningActors> = {}, effects: ProvisioningEffects = {}) => setup({
  types: {
    context: {} as T.ProvisioningContext,
    events: {} as T.ProvisioningEvent,
    input: {} as T.ProvisioningInput,
    output: {} as T.ProvisioningOutput,
    tags: {} as Health,
  },
  actors: { ...PLACEHOLDER_ACTORS, ...actors },
  guards: {
    /** Another agent holds the instance lock. */
    lockRefused: ({ context }) => !!context.startup.lockRefused,
    /** The platform check decided this is not an Azure VM (a check that failed decided nothing). */
    notOnAzure: ({ context }) => {
      const platform = context.startup.platform;
      return !!platform && 'onAzure' in platform && !platform.onAzure;
    },
    vmIdUnreadable: ({ context }) => !!context.startup.vmIdFailure,
    configFailed: ({ context }) => !!context.startup.configFailure,
    markerUnreadable: ({ context }) => !!context.startup.markerFailure,
    terminating: ({ context }) => context.terminating,
    markerProvisioned: ({ context }) => context.startup.marker === 'provisioned',
    markerReportPending: ({ context }) => context.startup.marker === 'report-pending',
    markerWaitingForReuse: ({ context }) => context.startup.marker === 'waiting-for-reuse',
    /** The IMDS request has left (or its head start is over): the media read has begun, and the host keys may. */
    imdsHeadStartOver: not(stateIn(`${MEDIA}.waitingForImds`)),
    /** A pool VM of the type this agent serves: report Ready to the pool and wait to be claimed. */
    poolRunning: ({ context }) => unclaimedPool(context)?.type === 'Running',
    /** A pool type this agent cannot serve: never provision the placeholder identity. */
    poolUnsupported: ({ context }) => {
      const type = unclaimedPool(context)?.type;
      return type !== undefined && type !== 'None' && type !== 'Running';
    },
    /** Claimed, yet IMDS still calls the VM pre-provisioned: its data cannot be trusted to be the customer's. */
    poolAfterClaim: ({ context }) =>
      context.reprovision !== null && normalizePpsType(context.metadata?.ppsType) !== 'None',
    stepSkipped: ({ context }, params: { step: StepName }) => context.config.steps.skip.includes(params.step),
    /** This VM's own host keys are in place (or their step is left out): sshd's drop-in may be proved now. */
    hostKeysReplaced: or([stateIn(`${HOST_KEYS}.waiting`), stateIn(`${HOST_KEYS}.adding`), stateIn(`${HOST_KEYS}.done`)]),
    /** READY=1 was sent: what is left may now take the CPU. */
    osConfigured: stateIn(`${WORK}.configured`),
    /** The report-pending marker is being written. */
    reportPendingInFlight: stateIn(`${WORK}.configured.markingReportPending`),
    /** The report-pending marker is durable: the next boot reports Ready. */
    reportPendingDown: stateIn(`${WORK}.configured.awaitingHostKeys`),
    /** Every host key is in place, those made after READY included. */
    hostKeysComplete: stateIn(`${HOST_KEYS}.done`),
    /** The host key step left types for the background. */
    hostKeysLeft: (_, params: { later: HostKeyType[] | undefined }) => (params.later?.length ?? 0) > 0,
    retryable: (_, params: { error: unknown }) => toFailure(params.error).retryable,
    /** The media names keys by fingerprint or key pairs, or the configuration places certificates: fetch them. */
    certificatesWanted: ({ context }) => certificatesWanted(context),
    /** Without the certificates' keys nobody could log in: their absence fails the run. */
    certificatesEssential: ({ context }) => certificatesEssential(context.plan),
    havePlan: ({ context }) => planFrom(context) !== null,
    /** The configuration requires the Guest Proxy Agent, or the media of this run (the customer's, once claimed) asks for it. */
    proxyAgentWanted: ({ context }) =>
      context.config.azure_proxy_agent.require ||
      (context.config.azure_proxy_agent.enable && (context.reprovision ?? context.media)?.provisionGuestProxyAgent === true),
  },
  delays: {
    imdsHeadStart: IMDS_HEAD_START_MS,
    imdsRetryInterval: ({ context }) => seconds(context.config.imds.retry_interval_secs),
    imdsTotalTimeout: ({ context }) => seconds(context.config.imds.total_retry_timeout_secs),
    /** Local work has a deadline too: a hung file system or command must not hold the first boot forever. */
    osTimeout: ({ context }) => seconds(context.config.os.timeout_secs),
    mediaTimeout: ({ context }) => seconds(context.config.provisioning_media.timeout_secs),
    /** The agent's own --wait, and a little more for the command itself. */
    proxyAgentTimeout: ({ context }) => seconds(context.config.azure_proxy_agent.wait_secs + 10),
    certificatesTotalTimeout: ({ context }) => seconds(context.config.certificates.total_retry_timeout_secs),
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
    /** What was read before the chart: the VM id, the platform check that could not decide. */
    recordStartup: assign(({ context }) => {
      const { platform, vmId } = context.startup;
      const unknown = platform && 'failure' in platform ? [`platform check failed: ${platform.failure.reason}; provisioning goes on`] : [];
      return { vmId: vmId ?? ZERO_VM_ID, warnings: [...context.warnings, ...unknown] };
    }),
    /** A config that failed to load, when the marker decides the boot anyway: a warning naming it, and what follows. */
    warnConfigFailed: assign({
      warnings: ({ context }, params: { then: string }) => {
        const configFailure = context.startup.configFailure;
        return configFailure ? [...context.warnings, `${describeFailure(configFailure)}; ${params.then}`] : context.warnings;
      },
    }),
    /** The run fails: with the error an actor threw, or the failure a state built. */
    recordFailure: assign({ failure: (_, params: { error: unknown }) => toFailure(params.error) }),
    /** Something went wrong that the run survives: a line for the log and the run's warnings. */
    warn: assign({ warnings: ({ context }, params: { text: string }) => [...context.warnings, params.text] }),
    recordImdsFailure: assign({ imdsFailure: (_, params: { error: unknown }) => toFailure(params.error) }),
    /** A retryable IMDS error: the next attempt is a new request. */
    recordImdsRetry: assign({
      imdsFailure: (_, params: { error: unknown }) => toFailure(params.error),
      imdsRetries: ({ context }) => context.imdsRetries + 1,
    }),
    recordImdsTimeout: assign({
      imdsFailure: ({ context }) =>
        timedOut(`IMDS did not answer usefully within ${context.config.imds.total_retry_timeout_secs} s`, context.imdsFailure),
    }),
    recordCertificatesRetry: assign({ certificatesFailure: (_, params: { error: unknown }) => toFailure(params.error) }),
    /** The keys the certificates gave join the plan's, for the SSH keys step. */
    recordCertificateKeys: assign({ plan: ({ context }, params: { keys: string[] }) => withCertificateKeys(context.plan, params.keys) }),
    recordReportFailure: assign({ reportFailure: (_, params: { error: unknown }) => toFailure(params.error) }),
    recordReportTimeout: assign({
      reportFailure: ({ context }) =>
        timedOut(`the wireserver did not accept the report within ${context.config.wireserver.total_retry_timeout_secs} s`, context.reportFailure),
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
      imdsRetries: 0,
      imdsSent: false,
    }),
    recordResumedWait: assign({ ppsType: 'Running' }),
    /** A stop once the OS is configured: Ready is left for the next boot, never turned into a failure. */
    recordReadyTerminated: assign({
      terminating: true,
      reportFailure: () => failure('TERMINATED', [['error', 'received SIGTERM once the OS was configured; the next boot reports Ready']]),
    }),
    recordTerminated: assign({
      terminating: true,
      failure: ({ context }) => context.failure ?? failure('TERMINATED', [['error', 'received SIGTERM']]),
    }),
    /** Sent before the HTTP report starts, so the host hears the outcome even when HTTP fails. */
    writeReportToKvp: enqueueActions(({ context, enqueue }, params: { health: T.KvpEvent['health'] }) => {
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
    tellSystemdReady: enqueueActions(({ enqueue }) => {
      enqueue(() => effects.systemdReady?.());
    }),
    recordKvpFailure: assign({
      kvpStopped: true,
      warnings: ({ context }, params: { error: unknown }) => [
        ...context.warnings,
        `kvp writer stopped: ${toFailure(params.error).reason}`,
      ],
    }),
  },
});

/** The chart's setup with its placeholder actors: what every state file builds on. */
export const chart = provisioningSetup();
