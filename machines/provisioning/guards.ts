/** The provisioning chart's guards, by name: what each decision of the chart reads. */
import { not, or, stateIn } from 'xstate';
import { normalizePpsType } from '../../src/azure/pps.js';
import type { StepName } from '../../src/config/defaults.js';
import type { HostKeyType } from '../../src/os/ssh/host-keys.js';
import { retryable } from '../retry.js';
import { MEDIA_WAITING_FOR_IMDS } from './head-start.js';
import { certificatesEssential, certificatesWanted, planFrom, unclaimedPool } from './plan.js';
import type { ProvisioningContext } from './types.js';

const WORK = '#provisioning.provisioning.work';
const HOST_KEYS = '#provisioning.provisioning.hostKeys';

type Args = { context: ProvisioningContext };

/** What was read before the chart, for `starting`. */
const startupGuards = {
  /** Another agent holds the instance lock. */
  lockRefused: ({ context }: Args) => !!context.startup.lockRefused,
  /** The platform check decided this is not an Azure VM (a check that failed decided nothing). */
  notOnAzure: ({ context }: Args) => {
    const platform = context.startup.platform;
    return !!platform && 'onAzure' in platform && !platform.onAzure;
  },
  vmIdUnreadable: ({ context }: Args) => !!context.startup.vmIdFailure,
  configFailed: ({ context }: Args) => !!context.startup.configFailure,
  markerUnreadable: ({ context }: Args) => !!context.startup.markerFailure,
  markerProvisioned: ({ context }: Args) => context.startup.marker === 'provisioned',
  markerReportPending: ({ context }: Args) => context.startup.marker === 'report-pending',
  markerWaitingForReuse: ({ context }: Args) => context.startup.marker === 'waiting-for-reuse',
};

/** What the gathered metadata makes of the run. */
const planGuards = {
  /** A pool VM of the type this agent serves: report Ready to the pool and wait to be claimed. */
  poolRunning: ({ context }: Args) => unclaimedPool(context)?.type === 'Running',
  /** A pool type this agent cannot serve: never provision the placeholder identity. */
  poolUnsupported: ({ context }: Args) => {
    const type = unclaimedPool(context)?.type;
    return type !== undefined && type !== 'None' && type !== 'Running';
  },
  /** Claimed, yet IMDS still calls the VM pre-provisioned: its data cannot be trusted to be the customer's. */
  poolAfterClaim: ({ context }: Args) => context.reprovision !== null && normalizePpsType(context.metadata?.ppsType) !== 'None',
  stepSkipped: ({ context }: Args, params: { step: StepName }) => context.config.steps.skip.includes(params.step),
  /** The media names keys by fingerprint or key pairs, or the configuration places certificates: fetch them. */
  certificatesWanted: ({ context }: Args) => certificatesWanted(context),
  /** Without the certificates' keys nobody could log in: their absence fails the run. */
  certificatesEssential: ({ context }: Args) => certificatesEssential(context.plan),
  havePlan: ({ context }: Args) => planFrom(context) !== null,
  /** The configuration requires the Guest Proxy Agent, or the media of this run (the customer's, once claimed) asks for it. */
  proxyAgentWanted: ({ context }: Args) =>
    context.config.azure_proxy_agent.require ||
    (context.config.azure_proxy_agent.enable && (context.reprovision ?? context.media)?.provisionGuestProxyAgent === true),
};

/** Where the parallel regions are, for the regions that wait on one another. */
const regionGuards = {
  /** The IMDS request has left (or its head start is over): the media read has begun, and the host keys may. */
  imdsHeadStartOver: not(stateIn(MEDIA_WAITING_FOR_IMDS)),
  /** This VM's own host keys are in place (or their step is left out): sshd's drop-in may be proved now. */
  hostKeysReplaced: or([stateIn(`${HOST_KEYS}.waiting`), stateIn(`${HOST_KEYS}.adding`), stateIn(`${HOST_KEYS}.done`)]),
  /** READY=1 was sent: what is left may now take the CPU. */
  osConfigured: stateIn(`${WORK}.configured`),
  /** The report-pending marker is being written. */
  reportPendingInFlight: stateIn(`${WORK}.configured.reportPending.markingReportPending`),
  /** The report-pending marker is durable: the next boot reports Ready. */
  reportPendingDown: or([stateIn(`${WORK}.configured.reportPending.awaitingHostKeys`), stateIn(`${WORK}.configured.reportPending.done`)]),
  /** Every host key is in place, those made after READY included. */
  hostKeysComplete: stateIn(`${HOST_KEYS}.done`),
};

export const guards = {
  ...startupGuards,
  terminating: ({ context }: Args) => context.terminating,
  ...planGuards,
  ...regionGuards,
  /** The host key step left types for the background. */
  hostKeysLeft: (_: unknown, params: { later: HostKeyType[] | undefined }) => (params.later?.length ?? 0) > 0,
  retryable,
};
