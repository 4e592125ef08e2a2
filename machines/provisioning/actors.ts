/** The placeholder of every actor the chart invokes: the chart performs no I/O, `src/provision/` provides them for real. */
import { fromCallback } from 'xstate';
import type { InstanceMetadata, MediaMetadata } from '../../src/core/metadata.js';
import type { HostKeyType } from '../../src/os/ssh/host-keys.js';
import { placeholder } from '../placeholder.js';
import type * as T from './types.js';

export const PLACEHOLDER_ACTORS = {
  kvpWriter: fromCallback<T.KvpEvent>(() => undefined),
  reportHealth: placeholder<void, T.ReportInput>('reportHealth'),
  fetchMetadata: placeholder<InstanceMetadata, T.ImdsInput>('fetchMetadata'),
  readMedia: placeholder<MediaMetadata | null, T.MediaInput>('readMedia'),
  validatePlan: placeholder<T.ProvisioningPlan, T.ValidateInput>('validatePlan'),
  setHostname: placeholder<void, T.PlanInput>('setHostname'),
  publishHostname: placeholder<void, T.PlanInput>('publishHostname'),
  createUser: placeholder<void, T.PlanInput>('createUser'),
  setPassword: placeholder<void, T.PlanInput>('setPassword'),
  writeSshKeys: placeholder<void, T.PlanInput>('writeSshKeys'),
  /** The goal state's certificates: installs them and the key pairs, and gives the OpenSSH lines of the keys named by fingerprint. */
  fetchCertificates: placeholder<string[], T.PlanInput>('fetchCertificates'),
  configureSshd: placeholder<void, T.PlanInput>('configureSshd'),
  regenerateHostKeys: placeholder<HostKeyType[], T.ConfigInput>('regenerateHostKeys'),
  addHostKeys: placeholder<void, T.HostKeysInput>('addHostKeys'),
  /** On a boot that only reports Ready: makes the configured host key types a stopped earlier boot left missing. */
  completeHostKeys: placeholder<void, T.ConfigInput>('completeHostKeys'),
  checkProxyAgent: placeholder<void, T.ConfigInput>('checkProxyAgent'),
  markReportPending: placeholder<void, T.MarkerInput>('markReportPending'),
  markProvisioned: placeholder<void, T.MarkerInput>('markProvisioned'),
  saveCustomData: placeholder<void, T.PlanInput>('saveCustomData'),
  markWaitingForReuse: placeholder<void, T.MarkerInput>('markWaitingForReuse'),
  pollReprovisionData: placeholder<MediaMetadata, T.PollInput>('pollReprovisionData'),
  markWaitingForShutdown: placeholder<void, T.MarkerInput>('markWaitingForShutdown'),
  /** A Savable pool VM: resolves once the host has detached a NIC (its name). */
  waitForNicDetach: placeholder<string, T.ConfigInput>('waitForNicDetach'),
  /** Resolves with a NIC present and not yet tried: one already there, or the next one the host hot-attaches. */
  waitForNicAttach: placeholder<T.AttachedNic, T.NicWaitInput>('waitForNicAttach'),
  /** Link up and DHCP on the NIC, then whether the fabric answers through it; a retryable error: not the primary. */
  probePrimaryNic: placeholder<void, T.ProbeInput>('probePrimaryNic'),
  /** Resolves with the name of a NIC whose carrier went down and came up again (the claim moved it). */
  waitForCarrierSwitch: placeholder<string, T.ConfigInput>('waitForCarrierSwitch'),
  /** Makes the NIC's stack renew its lease (networkd does on its own; ifupdown and NetworkManager are asked). */
  renewLease: placeholder<void, T.LeaseInput>('renewLease'),
};

export type ProvisioningActors = typeof PLACEHOLDER_ACTORS;
