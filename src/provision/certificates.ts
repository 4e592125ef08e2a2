/**
 * The goal state's certificates for the chart's `fetchCertificates` step: one attempt at the goal state, then, when
 * it names certificates, the Certificates document opened with a fresh transport key; the keys named by fingerprint
 * become OpenSSH lines for the SSH keys step, the key pairs and (per `[certificates] place`) every certificate are
 * installed. A fingerprint without its certificate is a warning; when no key is left at all and password logins
 * are off, the step fails naming it (the key policy of IMDS keys).
 */
import type { Logger } from 'pino';
import type { ProvisioningPlan } from '../../machines/provisioning.js';
import { fetchCertificatesOnce, fetchGoalStateOnce } from '../azure/goal-state.js';
import type { Config } from '../config/defaults.js';
import { toFailure } from '../core/errors.js';
import { openCertificates, withTransportCertificate, type BundleCertificate } from '../os/certificates/certificate-bundle.js';
import { noUsableKey, type SkippedKey } from '../os/ssh/key-policy.js';
import { opensshPublicKey } from '../os/certificates/openssh-key.js';
import type { CertificatesRequest, Provisioner } from '../os/provisioner.js';

export interface CertificatesDeps {
  log: Logger;
  provisioner: Provisioner;
  /** Where the transport key's private directory is made: root-only `/run` on a VM. */
  transportParent?: string;
}

/** One attempt: the OpenSSH lines of the keys named by fingerprint that the goal state had. */
export async function fetchCertificates(deps: CertificatesDeps, { config, plan }: { config: Config; plan: ProvisioningPlan }, signal: AbortSignal): Promise<string[]> {
  const { log } = deps;
  const started = Date.now();
  const { bundle, certificatesPath } = await readBundle(deps, config, signal);
  const byThumbprint = new Map(bundle.map((c) => [c.thumbprint, c]));
  const missing = (thumbprint: string) => (certificatesPath ? `no certificate with thumbprint ${thumbprint} in the goal state` : 'the goal state has no certificates');
  const keys = sshKeysOf(log, plan, byThumbprint, missing);
  const keyPairs = keyPairsOf(log, plan, byThumbprint, missing);
  // Files that cannot be written never cost the VM the keys it got: a warning, and the keys go on.
  if (bundle.length > 0 || keyPairs.length > 0) {
    try {
      const result = await deps.provisioner.installCertificates({ username: plan.username, place: config.certificates.place, certificates: bundle, keyPairs }, signal);
      for (const warning of result.warnings ?? []) log.warn({ step: 'certificates', backend: result.backend }, warning);
    } catch (error) {
      if (signal.aborted) throw error;
      log.warn({ step: 'certificates', code: toFailure(error).code }, `certificates not installed: ${(error as Error).message}`);
    }
  }
  log.info(
    { step: 'certificates', certificates: bundle.length, keys: keys.length, key_pairs: keyPairs.length, ms: Date.now() - started },
    `goal state: ${bundle.length} certificate(s); ${keys.length} ssh key(s) by fingerprint, ${keyPairs.length} key pair(s)`,
  );
  return keys;
}

type ByThumbprint = Map<string, BundleCertificate>;

/** The goal state, and its certificates opened with a fresh transport key when it names any; a failure is logged. */
async function readBundle(deps: CertificatesDeps, config: Config, signal: AbortSignal): Promise<{ bundle: BundleCertificate[]; certificatesPath: string | null }> {
  const request = { config: config.wireserver, signal };
  try {
    const { certificatesPath } = await fetchGoalStateOnce(request);
    if (!certificatesPath) return { bundle: [], certificatesPath };
    const bundle = await withTransportCertificate(deps.transportParent ?? '/run', { signal }, async (transport) =>
      openCertificates(transport, await fetchCertificatesOnce(request, certificatesPath, transport.certificateBase64), { signal }),
    );
    return { bundle, certificatesPath };
  } catch (error) {
    if (!signal.aborted) {
      const failure = toFailure(error);
      const level = failure.retryable ? 'warn' : 'error';
      deps.log[level]({ step: 'certificates', code: failure.code, reason: failure.reason, retryable: failure.retryable }, `goal state certificates: ${(error as Error).message}`);
    }
    throw error;
  }
}

/**
 * The OpenSSH lines of the keys the media names by fingerprint; one that is missing or unusable is a warning, and
 * none left at all with no other key and password logins off fails the step.
 */
function sshKeysOf(log: Logger, plan: ProvisioningPlan, byThumbprint: ByThumbprint, missing: (thumbprint: string) => string): string[] {
  const keys: string[] = [];
  const skipped: SkippedKey[] = [];
  for (const fingerprint of plan.keyFingerprints ?? []) {
    const certificate = byThumbprint.get(fingerprint);
    try {
      if (!certificate) throw new Error(missing(fingerprint));
      keys.push(opensshPublicKey(certificate.publicKey));
    } catch (error) {
      skipped.push({ key: fingerprint, problem: (error as Error).message });
    }
  }
  for (const { key, problem } of skipped) log.warn({ step: 'certificates', fingerprint: key, problem }, `ssh key ${key} skipped: ${problem}`);
  if (keys.length === 0 && skipped.length > 0 && plan.sshKeys.length === 0 && !plan.passwordAuthentication) throw noUsableKey(skipped);
  return keys;
}

/** The key pairs the media asks to install that the goal state has a private key for; the others are warnings. */
function keyPairsOf(log: Logger, plan: ProvisioningPlan, byThumbprint: ByThumbprint, missing: (thumbprint: string) => string): CertificatesRequest['keyPairs'] {
  const keyPairs: CertificatesRequest['keyPairs'] = [];
  for (const pair of plan.keyPairs ?? []) {
    const certificate = byThumbprint.get(pair.fingerprint);
    if (!certificate?.privateKeyPem) {
      log.warn({ step: 'certificates', fingerprint: pair.fingerprint }, `key pair ${pair.fingerprint} not installed: ${certificate ? 'the goal state has no private key for it' : missing(pair.fingerprint)}`);
      continue;
    }
    keyPairs.push({ fingerprint: pair.fingerprint, path: pair.path, privateKeyPem: certificate.privateKeyPem, publicKeyLine: opensshPublicKey(certificate.publicKey) });
  }
  return keyPairs;
}
