/**
 * The goal state's certificates, opened with the `openssl` CLI every image has (as cloud-init and WALinuxAgent do):
 * Node's crypto can neither make an X.509 certificate nor open a CMS envelope, and a JavaScript CMS/PKCS#12
 * library would be a new dependency holding private keys. The transport key pair lives in a fresh 0700 directory
 * that is removed when the work is done, however it ends; no private key is ever in an argument, only paths.
 */
import type * as Crypto from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError } from '../../core/errors.js';
import { normalizeThumbprint } from '../../core/metadata.js';
import { firstLine, isCommandMissing, run, stderrOf, type Runner } from '../../system/exec.js';
import { removeOnExit } from '../../system/exit-cleanup.js';

/** node:crypto on first use: a run without certificates never loads it (milliseconds of every start). */
const crypto = (): typeof Crypto => process.getBuiltinModule('node:crypto');

/** The transport certificate sent with the Certificates request, and where its key is. */
export interface TransportCertificate {
  /** The certificate, base64 DER without PEM armour: the value of `x-ms-guest-agent-public-x509-cert`. */
  certificateBase64: string;
  certificateFile: string;
  keyFile: string;
  dir: string;
  /** The minimal openssl configuration every command here runs with (`OPENSSL_CONF`). */
  config: string;
}

/** One certificate of the bundle: its thumbprint as Azure writes it, its PEM, its public key, its private key if the bundle had it. */
export interface BundleCertificate {
  thumbprint: string;
  certificatePem: string;
  publicKey: KeyObject;
  /** PKCS#8 PEM; a secret: never logged, never in context or argv. */
  privateKeyPem?: string;
}

export interface OpenSslOptions {
  signal?: AbortSignal;
  /** The configuration file given as OPENSSL_CONF. */
  config?: string;
  /** Bound on each openssl command. */
  timeoutMs?: number;
  runner?: Runner;
}

const BUNDLE_OUTPUT_BYTES = 8 * 1024 * 1024;

/**
 * Makes a transport key pair and self-signed certificate (RSA 3072, as cloud-init) in a new 0700 directory under
 * `parent`, runs `use` with it, and removes the directory afterwards, whether `use` succeeded, failed or was aborted.
 */
export async function withTransportCertificate<T>(parent: string, options: OpenSslOptions, use: (transport: TransportCertificate) => Promise<T>): Promise<T> {
  // `/run` exists on every VM; a scratch run's own `run` may not yet.
  await mkdir(parent, { recursive: true, mode: 0o755 }).catch(() => undefined);
  const dir = await mkdtemp(path.join(parent, 'bootstate-transport-')).catch((error: NodeJS.ErrnoException) => {
    throw failed(`cannot make a private directory under ${parent}: ${error.code ?? error.message}`);
  });
  // The transport key is a private key: an exit while it exists (a SIGTERM during the request) still removes it.
  const forget = removeOnExit(dir);
  try {
    await chmod(dir, 0o700);
    // Its own configuration: the image's openssl.cnf may be missing or add extensions; `req` needs only a name section.
    const config = path.join(dir, 'openssl.cnf');
    await writeFile(config, '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n', { mode: 0o600 });
    const keyFile = path.join(dir, 'transport.key');
    const certificateFile = path.join(dir, 'transport.crt');
    const own = { ...options, config };
    await openssl(['req', '-config', config, '-x509', '-nodes', '-newkey', 'rsa:3072', '-keyout', keyFile, '-out', certificateFile, '-subj', '/CN=LinuxTransport', '-days', '730'], own, 'make the transport certificate');
    const certificateBase64 = new (crypto().X509Certificate)(await readFile(certificateFile)).raw.toString('base64');
    return await use({ certificateBase64, certificateFile, keyFile, dir, config });
  } finally {
    await rm(dir, { recursive: true, force: true });
    forget();
  }
}

/**
 * Opens the Certificates blob: a CMS enveloped-data (DER) for the transport certificate, holding a PKCS#12 bundle
 * without a password. Each certificate comes back with its private key when the bundle holds the matching one.
 *
 * @throws BootstateError CERTIFICATES_FAILED naming what did not work (not retryable: the same blob fails again).
 */
export async function openCertificates(transport: TransportCertificate, cms: Buffer, options: OpenSslOptions = {}): Promise<BundleCertificate[]> {
  const pfx = path.join(transport.dir, 'bundle.pfx');
  try {
    options = { ...options, config: transport.config };
    await openssl(['cms', '-decrypt', '-inform', 'DER', '-recip', transport.certificateFile, '-inkey', transport.keyFile, '-out', pfx], { ...options, stdin: cms }, 'decrypt the Certificates blob with the transport key');
    const pkcs12 = ['pkcs12', '-nodes', '-password', 'pass:', '-in', pfx];
    // Bundles made with RC2 or 3DES need OpenSSL 3's legacy provider; newer ones must not ask for it.
    const pem = await openssl(pkcs12, { ...options, maxOutputBytes: BUNDLE_OUTPUT_BYTES }, 'read the PKCS#12 bundle').catch(async (error: unknown) => {
      if (isCommandMissing(error)) throw error;
      return openssl([...pkcs12, '-legacy'], { ...options, maxOutputBytes: BUNDLE_OUTPUT_BYTES }, 'read the PKCS#12 bundle');
    });
    return certificatesFromPem(pem);
  } finally {
    await rm(pfx, { force: true });
  }
}

/** Certificates and private keys of a PEM text, each key given to the certificate with the same public key. */
export function certificatesFromPem(pem: string): BundleCertificate[] {
  const blocks = [...pem.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g)];
  const certificates: BundleCertificate[] = [];
  const keys: KeyObject[] = [];
  for (const [text, label] of blocks) {
    if (label === 'CERTIFICATE') {
      const x509 = new (crypto().X509Certificate)(text);
      certificates.push({ thumbprint: normalizeThumbprint(x509.fingerprint)!, certificatePem: `${text}\n`, publicKey: x509.publicKey });
    } else if (label!.endsWith('PRIVATE KEY')) {
      keys.push(crypto().createPrivateKey(text));
    }
  }
  const spki = (key: KeyObject) => key.export({ type: 'spki', format: 'der' }).toString('base64');
  const byPublicKey = new Map(keys.map((key) => [spki(crypto().createPublicKey(key)), key]));
  for (const certificate of certificates) {
    const key = byPublicKey.get(spki(certificate.publicKey));
    if (key) certificate.privateKeyPem = key.export({ type: 'pkcs8', format: 'pem' }).toString();
  }
  return certificates;
}

async function openssl(args: string[], options: OpenSslOptions & { stdin?: Buffer; maxOutputBytes?: number }, what: string): Promise<string> {
  const runner = options.runner ?? run;
  try {
    const env = options.config ? { ...process.env, OPENSSL_CONF: options.config } : undefined;
    const result = await runner(['openssl', ...args], { signal: options.signal, timeoutMs: options.timeoutMs ?? 60_000, stdin: options.stdin, maxOutputBytes: options.maxOutputBytes, env });
    return result.stdout;
  } catch (error) {
    if (options.signal?.aborted) throw error;
    if (isCommandMissing(error)) throw failed('openssl is not installed: the goal state certificates cannot be opened');
    throw failed(`openssl could not ${what}: ${firstLine(stderrOf(error))}`);
  }
}

function failed(problem: string): BootstateError {
  return new BootstateError('CERTIFICATES_FAILED', problem, { data: [['problem', problem]] });
}
