/**
 * The OS changes bootstate makes, behind one interface. `real` runs the system's commands; `scratch` only
 * writes under a directory and records the commands it would run (the demo and tests use it).
 */
import type { SecretStore } from '../core/secrets.js';
import type { HostKeysResult, HostKeyType } from './ssh/host-keys.js';

export interface StepResult {
  /** Which backend did the work (e.g. `hostnamectl`, `hostname`, `useradd`). */
  backend: string;
  /** Human detail for the log and telemetry; never a secret. */
  detail?: string;
  warnings?: string[];
  /** Text for the console (the unit's stdout): the new host keys' fingerprints. Never a secret. */
  console?: string;
}

export interface UserRequest {
  username: string;
  groups: string[];
  /** A password was provisioned (ovf-env.xml): `sudo = "auto"` then gives a rule that asks for it. */
  passwordProvided: boolean;
}

export interface SshKeysRequest {
  username: string;
  keys: string[];
  /** Whether password logins stay on: without them, a VM whose keys sshd cannot use must fail. Default true. */
  passwordAuthentication?: boolean;
}

/** What the certificates step installs; private keys are secrets, never logged. */
export interface CertificatesRequest {
  username: string;
  /** `[certificates] place`: whether every certificate goes to /var/lib/waagent. */
  place: 'auto' | boolean;
  certificates: Array<{ thumbprint: string; certificatePem: string; privateKeyPem?: string }>;
  /** `KeyPairs`: a private key for the user at `path` (as the media wrote it), with its OpenSSH public line. */
  keyPairs: Array<{ fingerprint: string; path: string; privateKeyPem: string; publicKeyLine: string }>;
}

export interface Provisioner {
  readonly name: string;
  /**
   * Checks a username before any step runs (portable name, length, not a system account); throws
   * INVALID_USERNAME. Optional so test doubles need not implement it; createUser validates again anyway.
   */
  validateUsername?(username: string): Promise<void>;
  setHostname(hostname: string, signal: AbortSignal): Promise<StepResult>;
  /** Makes the running DHCP client send `hostname` (config `[hostname_publishing]`); none running is a warning. */
  publishHostname(hostname: string, signal: AbortSignal): Promise<StepResult>;
  createUser(request: UserRequest, signal: AbortSignal): Promise<StepResult>;
  /** Locks the password, or sets it from `secrets` when one was provided (stdin only, never argv). */
  setPassword(username: string, secrets: SecretStore, signal: AbortSignal): Promise<StepResult>;
  writeSshKeys(request: SshKeysRequest, signal: AbortSignal): Promise<StepResult>;
  configureSshd(passwordAuthentication: boolean, signal: AbortSignal): Promise<StepResult>;
  /** Waits until Azure's Guest Proxy Agent reports ready (`azure-proxy-agent --status --wait`). */
  checkProxyAgent(signal: AbortSignal): Promise<StepResult>;
  /**
   * Replaces the image's SSH host keys by new ones (config `[host_keys]`); the result names the types left for
   * `addHostKeys`, made in the background.
   */
  regenerateHostKeys(signal: AbortSignal): Promise<HostKeysResult>;
  /** Adds the host keys of `types` while sshd may be running; never fails the run (warnings). */
  addHostKeys(types: readonly HostKeyType[], signal: AbortSignal): Promise<StepResult>;
  /** On a boot that only reports Ready: makes the configured host key types a stopped earlier boot left missing. */
  completeHostKeys(signal: AbortSignal): Promise<StepResult>;
  /**
   * Writes the goal state's certificates to /var/lib/waagent (per `place`) and the key pairs into the user's
   * home; a key pair that cannot be installed is a warning.
   */
  installCertificates(request: CertificatesRequest, signal: AbortSignal): Promise<StepResult>;
  /** Saves the custom data and user data held in `secrets` as 0600 root files (config `[custom_data]`). */
  saveCustomData(secrets: SecretStore, signal: AbortSignal): Promise<StepResult>;
}

/**
 * What the markers say about a VM id. `provisioned`: Ready was accepted; `report-pending`: provisioning done, Ready
 * not yet accepted; `waiting-for-reuse`: a pool VM reported Ready to the pool and waits to be claimed
 * (`waiting-for-reuse-savable`: a Savable one, which may have to wait for its NIC again);
 * `waiting-for-shutdown`: an OS-disk pool VM reported Ready to the pool and waited for the host to shut it down.
 */
export type MarkerState = 'none' | 'provisioned' | 'report-pending' | 'waiting-for-reuse' | 'waiting-for-reuse-savable' | 'waiting-for-shutdown';

/** Provisioned-marker store keyed by VM id (docs/protocol.md#provisioned-marker, and the "report pending" state). */
export interface MarkerStore {
  state(vmId: string): Promise<MarkerState>;
  markReportPending(vmId: string): Promise<void>;
  /** Records that Ready reached the pool, so a reboot resumes waiting instead of reporting again. */
  markWaitingForReuse(vmId: string, ppsType?: string): Promise<void>;
  /** Records that an OS-disk pool VM's Ready reached the pool: a boot that finds it was not shut down as it should. */
  markWaitingForShutdown(vmId: string): Promise<void>;
  markProvisioned(vmId: string): Promise<void>;
  clean(options: { logs: boolean; logPath: string }): Promise<string[]>;
}
