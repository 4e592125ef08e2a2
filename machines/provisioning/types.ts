/** The provisioning chart's types: its context, input and output, its events, and the input of each actor. */
import type { Health, HEALTH_FAILED, HEALTH_READY } from '../../src/azure/health.js';
import type { CertificateReference, InstanceMetadata, MediaMetadata } from '../../src/core/metadata.js';
import type { Config } from '../../src/config/defaults.js';
import type { Failure } from '../../src/core/errors.js';
import type { HostKeyType } from '../../src/os/ssh/host-keys.js';
import type { PlatformCheck } from '../../src/azure/platform.js';
import type { MarkerState } from '../../src/os/provisioner.js';
import type { ImdsSentEvent } from './head-start.js';

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
  /** Thumbprints of the goal state certificates whose keys the media lists as the user's SSH keys. */
  keyFingerprints?: string[];
  /** Private keys of the goal state the media asks to install (`KeyPairs`). */
  keyPairs?: CertificateReference[];
}

/**
 * How a run ended: `waiting-for-reuse` is a pool VM stopped while it waited (its next boot waits again);
 * `pool-shutdown` an OS-disk pool VM shut down by the host, as it waited for.
 */
export type ProvisioningResult = 'provisioned' | 'already-provisioned' | 'waiting-for-reuse' | 'pool-shutdown' | 'not-on-azure' | 'failed';

export interface ProvisioningOutput {
  result: ProvisioningResult;
  exitCode: number;
  reason?: string;
  code?: string;
  /** Whether the final health report was accepted by the wireserver. */
  reported: boolean;
}

/** What each final state of the chart says about the run; the chart's output is made from it. */
export interface RunEnd {
  result: ProvisioningResult;
  reported: boolean;
}

/**
 * What the run found out before the chart was built (src/provision/provision.ts), each read or its failure: the chart's
 * first state routes on it. A fact left out reads as "nothing wrong": no failure, on Azure, marker `none`.
 */
export interface StartupFacts {
  /**
   * The configuration did not load: the run goes on with the keys saying where its state is and where it reports (or
   * the defaults); a marker proving the outcome makes this a warning, any other boot reports it once the VM id is known.
   */
  configFailure?: Failure | null;
  /** Whether this is an Azure VM, or why the check could not tell (the run then goes on, with a warning). */
  platform?: PlatformCheck | { failure: Failure };
  /** Another agent holds the instance lock: this run ends at once, reporting nothing (the holder reports). */
  lockRefused?: Failure | null;
  /** This VM's id, or why it could not be read. */
  vmId?: string | null;
  vmIdFailure?: Failure | null;
  /** This VM id's marker, or why it could not be read. */
  marker?: MarkerState | null;
  markerFailure?: Failure | null;
  /** The run sent its first IMDS request before the chart was loaded: IMDS attempt 1 is already on its way. */
  imdsSent?: boolean;
}

export interface ProvisioningContext {
  config: Config;
  /** What was read before the chart started. */
  startup: StartupFacts;
  /** Groups from `--groups`, merged over the configured ones. */
  extraGroups: string[];
  vmId: string;
  metadata: InstanceMetadata | null;
  media: MediaMetadata | null;
  /** Why the provisioning media could not be used; validation decides whether that fails the run. */
  mediaFailure: Failure | null;
  imdsFailure: Failure | null;
  /** The last retryable failure of the goal state's certificates, named when their deadline passes. */
  certificatesFailure: Failure | null;
  /** IMDS attempts of this pass that failed and were retried: the next attempt's number is one more. */
  imdsRetries: number;
  /** Host key types the host key step left for the background (sshd reads them per connection). */
  hostKeysLater: HostKeyType[];
  plan: ProvisioningPlan | null;
  failure: Failure | null;
  /** Why Ready was not accepted (the run had not failed before it). */
  reportFailure: Failure | null;
  terminating: boolean;
  /** The KVP writer failed and left: reports still go over HTTP, without their KVP record. */
  kvpStopped: boolean;
  warnings: string[];
  /** The preprovisioning type carried in every encoded report (`None` for an ordinary VM). */
  ppsType: string;
  /** The customer's ovf-env.xml, once a pool VM has been claimed (`reprovisiondata`). */
  reprovision: MediaMetadata | null;
  /** Failed polls of `reprovisiondata` so far (a run waits once), and the kind of the last one: the logging policy reads them. */
  pollAttempts: number;
  pollError: string | null;
  /** A Savable pool VM: the attached NIC being tried as the primary one, and the names of those that were not. */
  nic: AttachedNic | null;
  nicsTried: string[];
  /** The NIC whose carrier switch the lease region saw last, for its renewal. */
  leaseNic: string | null;
}

/** A network interface the host hot-attached. */
export interface AttachedNic {
  name: string;
  mac: string;
}

export interface ProvisioningInput {
  config?: Config;
  groups?: string[];
  startup?: StartupFacts;
}

/**
 * SIGTERM, and `imds.sent`: the IMDS actor's request has been written to its socket (or its attempt ended without
 * that), so the work that would compete with it for the CPU may start (the head start).
 */
export type ProvisioningEvent = { type: 'TERMINATE' } | ImdsSentEvent;

/** Events the chart sends to the root-level KVP writer. */
export type KvpEvent = { type: 'kvp.report'; health: typeof HEALTH_READY | typeof HEALTH_FAILED; vmId: string; failure: Failure | null; ppsType: string };

/** Plain input of each actor, taken from context. */
export interface ConfigInput {
  config: Config;
}
export interface ReportInput extends ConfigInput {
  vmId: string;
  health: Health;
  failure: Failure | null;
  ppsType: string;
  /** A Savable pool VM's Ready: a transport failure once the request was sent is the expected end, not a failure. */
  answerMayBeLost?: boolean;
}
/** The NICs already tried as the primary one, by name. */
export interface NicWaitInput extends ConfigInput {
  tried: string[];
}
export interface ProbeInput extends ConfigInput {
  nic: AttachedNic;
}
export interface LeaseInput extends ConfigInput {
  nic: string;
}
/** Input of one IMDS attempt: its number in this pass, and whether it is the request the run sent before the chart. */
export interface ImdsInput extends ConfigInput {
  attempt: number;
  sent: boolean;
  /** Tells the chart the request has been written to its socket, or the attempt ended without that (head-start.ts). */
  written?: () => void;
}
/** Input of one poll of `reprovisiondata`: which attempt this is and how the previous one failed. */
export interface PollInput extends ConfigInput {
  attempt: number;
  previousError: string | null;
}
/** The host key types made in the background. */
export interface HostKeysInput extends ConfigInput {
  types: HostKeyType[];
}
export interface MarkerInput extends ConfigInput {
  vmId: string;
  /** The pool type, for the reuse marker: a Savable VM's has a name of its own. */
  ppsType?: string;
}
/** The media is read once more after a pool VM is claimed, for the customer's document only. */
export interface MediaInput extends ConfigInput {
  claimed: boolean;
}
export interface PlanInput extends ConfigInput {
  plan: ProvisioningPlan;
}
/** Validation also decides whether unreadable provisioning media fails the run. */
export interface ValidateInput extends PlanInput {
  mediaFailure: Failure | null;
}
