/** Pure functions of the chart's context: the plan, the pool type, the failures built from what was gathered, the output. */
import { poolType } from '../../src/azure/pps.js';
import { failure, type Failure } from '../../src/core/errors.js';
import type { ProvisioningContext, ProvisioningOutput, ProvisioningPlan, RunEnd } from './types.js';

/** The plan from IMDS, or from the media when IMDS failed and the media names the user; null when neither can. */
export function planFrom(context: ProvisioningContext): ProvisioningPlan | null {
  const { metadata: imds, config } = context;
  // Once claimed, the physical media still holds the pool's placeholder: only the customer's document counts.
  const media = context.reprovision ?? context.media;
  const hasCustomData = imds?.hasCustomData ?? false;
  const customDataFound = media?.customDataPresent ?? false;
  const groups = [...new Set([...config.user_provisioners.groups, ...context.extraGroups])];
  const passwordProvided = media?.passwordProvided ?? false;
  // Keys named by fingerprint and key pairs come only from the media, whichever source the rest comes from.
  const certificates = {
    ...(media?.keyFingerprints?.length ? { keyFingerprints: media.keyFingerprints.map((f) => f.fingerprint) } : {}),
    ...(media?.keyPairs?.length ? { keyPairs: media.keyPairs } : {}),
  };
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
      ...certificates,
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
      ...certificates,
    };
  }
  return null;
}

/**
 * Whether the SSH keys step fetches the goal state's certificates first: the media names keys by fingerprint or
 * key pairs, or `[certificates] place = true` asks for them alone; never when the SSH keys step is left out.
 */
export function certificatesWanted({ plan, config }: Pick<ProvisioningContext, 'plan' | 'config'>): boolean {
  if (!plan || config.steps.skip.includes('ssh-keys')) return false;
  return (plan.keyFingerprints?.length ?? 0) > 0 || (plan.keyPairs?.length ?? 0) > 0 || config.certificates.place === true;
}

/** The keys named by fingerprint are the only way in: no other key, and password logins are off. */
export const certificatesEssential = (plan: ProvisioningPlan | null): boolean =>
  !!plan && plan.sshKeys.length === 0 && (plan.keyFingerprints?.length ?? 0) > 0 && !plan.passwordAuthentication;

/** The plan with the keys the certificates gave added to its own (each once). */
export const withCertificateKeys = (plan: ProvisioningPlan | null, keys: string[]): ProvisioningPlan | null =>
  plan && { ...plan, sshKeys: [...new Set([...plan.sshKeys, ...keys])] };

/** Why there is no plan: IMDS failed, and the media was not there or could not stand in for it. */
export function noMetadataFailure(context: ProvisioningContext): Failure {
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
export const unclaimedPool = (context: ProvisioningContext) =>
  context.reprovision === null ? poolType(context.metadata?.ppsType, context.media?.ppsType) : null;

/** IMDS still names a pool type after the claim. */
export const poolAfterClaim = (ppsType: string | undefined): Failure =>
  failure('IMDS_INVALID', [
    ['key', 'extended.compute.ppsType'],
    ['value', ppsType ?? ''],
    ['error', 'IMDS still reports a preprovisioning type after the VM was claimed'],
  ]);

/** The Guest Proxy Agent's check gave no answer in time. */
export const proxyAgentSilent = (secs: number): Failure => failure('PROXY_AGENT_STATUS_FAILURE', [['error', `no answer within ${secs} s`]]);

/** The run's output, from the final state it ended in and the failure that ended it. */
export function outputOf(context: ProvisioningContext, end: RunEnd): ProvisioningOutput {
  const { result, reported } = end;
  const f = context.failure ?? context.reportFailure;
  if (result !== 'failed' || !f) return { result, exitCode: 0, reported };
  return { result, exitCode: f.exitCode, reason: f.reason, code: f.code, reported };
}
