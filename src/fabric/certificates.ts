/**
 * The goal state's Certificates document, for the fake fabric (goal-state.ts links it): a `CertificateFile` whose
 * `Data` is a PKCS#12 bundle (no password) enveloped with real `openssl cms -encrypt -des3` to the transport
 * certificate the agent sent, as the platform does. `makeCertificate` makes the self-signed certificates tests hand
 * to it.
 */
import type * as Crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

/** node:crypto on first use: a run without certificates never loads it (milliseconds of every start). */
const crypto = (): typeof Crypto => process.getBuiltinModule('node:crypto');

const exec = promisify(execFile);

/** A certificate the fabric holds for the VM, with its private key when the VM is to get it. */
export interface FabricCertificate {
  certificatePem: string;
  privateKeyPem?: string;
}

/** The Certificates document around an enveloped blob. */
export function certificatesXml(cms: Buffer, incarnation = 1): string {
  const data = cms.toString('base64').replace(/(.{64})/g, '$1\n');
  return `<?xml version="1.0" encoding="utf-8"?>
<CertificateFile xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="certificates10.xsd">
  <Version>2012-11-30</Version>
  <Incarnation>${incarnation}</Incarnation>
  <Format>Pkcs7BlobWithPfxContents</Format>
  <Data>${data}</Data>
</CertificateFile>
`;
}

/**
 * Bundles `certificates` as PKCS#12 without a password and envelopes it (CMS, DES-EDE3-CBC) to the transport
 * certificate given as base64 DER, the value of `x-ms-guest-agent-public-x509-cert`. The openssl CLI puts at
 * most one private key in a bundle: the first certificate's that has one.
 */
export async function sealCertificates(transportCertificateBase64: string, certificates: FabricCertificate[]): Promise<Buffer> {
  const recipient = new (crypto().X509Certificate)(Buffer.from(transportCertificateBase64, 'base64'));
  const dir = await mkdtemp(path.join(tmpdir(), 'fake-fabric-certs-'));
  try {
    const recipientFile = path.join(dir, 'transport.pem');
    await writeFile(recipientFile, recipient.toString());
    const withKey = certificates.find((c) => c.privateKeyPem);
    const others = certificates.filter((c) => c !== withKey);
    const args = ['pkcs12', '-export', '-passout', 'pass:', '-out', path.join(dir, 'bundle.pfx')];
    if (withKey) {
      await writeFile(path.join(dir, 'main.pem'), withKey.certificatePem + withKey.privateKeyPem!, { mode: 0o600 });
      args.push('-in', path.join(dir, 'main.pem'));
    } else {
      args.push('-nokeys', '-in', path.join(dir, 'others.pem'));
    }
    if (others.length > 0) {
      await writeFile(path.join(dir, 'others.pem'), others.map((c) => c.certificatePem).join(''));
      if (withKey) args.push('-certfile', path.join(dir, 'others.pem'));
    }
    await exec('openssl', args);
    const sealed = path.join(dir, 'sealed.der');
    await exec('openssl', ['cms', '-encrypt', '-des3', '-binary', '-outform', 'DER', '-in', path.join(dir, 'bundle.pfx'), '-out', sealed, recipientFile]);
    return await readFile(sealed);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A self-signed certificate and its key, e.g. a VM owner's SSH key as Azure holds it. `key`: an `-newkey` value. */
export async function makeCertificate(subject: string, key = 'rsa:2048'): Promise<FabricCertificate & { thumbprint: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'fake-fabric-cert-'));
  try {
    const keyArgs = key.startsWith('ec:') ? ['-newkey', 'ec', '-pkeyopt', `ec_paramgen_curve:${key.slice(3)}`] : ['-newkey', key];
    await exec('openssl', ['req', '-x509', '-nodes', ...keyArgs, '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem'), '-subj', `/CN=${subject}`, '-days', '365']);
    const certificatePem = await readFile(path.join(dir, 'c.pem'), 'utf8');
    const privateKeyPem = await readFile(path.join(dir, 'k.pem'), 'utf8');
    return { certificatePem, privateKeyPem, thumbprint: new (crypto().X509Certificate)(certificatePem).fingerprint.replace(/:/g, '') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
