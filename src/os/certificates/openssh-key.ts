/**
 * A public key in OpenSSH's `authorized_keys` form (RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709 §4), from the key of
 * an X.509 certificate: RSA, ECDSA on the NIST curves, and Ed25519. Node exports the key's numbers as JWK; the
 * wire encoding is a few length-prefixed fields, so no `ssh-keygen` process is needed per key.
 */
import type { KeyObject } from 'node:crypto';
import { BootstateError } from '../../core/errors.js';

const CURVES: Record<string, string> = { 'P-256': 'nistp256', 'P-384': 'nistp384', 'P-521': 'nistp521' };

/** An SSH `string`: a 32-bit big-endian length, then the bytes. */
function sshString(bytes: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

/** An SSH `mpint` of a non-negative number given as big-endian bytes: no leading zeros, one added before a set top bit. */
function mpint(unsigned: Buffer): Buffer {
  let start = 0;
  while (start < unsigned.length && unsigned[start] === 0) start++;
  const bytes = unsigned.subarray(start);
  return sshString(bytes.length > 0 && bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

const b64u = (text: string | undefined) => Buffer.from(text ?? '', 'base64url');

/** The key's SSH wire blob (what the base64 of an authorized_keys line holds) and its type name. */
export function sshPublicKeyBlob(key: KeyObject): { type: string; blob: Buffer } {
  if (key.type !== 'public') throw unsupported('not a public key');
  const jwk = key.export({ format: 'jwk' });
  if (jwk.kty === 'RSA') {
    const type = 'ssh-rsa';
    return { type, blob: Buffer.concat([sshString(Buffer.from(type)), mpint(b64u(jwk.e)), mpint(b64u(jwk.n))]) };
  }
  if (jwk.kty === 'EC' && jwk.crv && CURVES[jwk.crv]) {
    const curve = CURVES[jwk.crv]!;
    const type = `ecdsa-sha2-${curve}`;
    const point = Buffer.concat([Buffer.from([4]), b64u(jwk.x), b64u(jwk.y)]);
    return { type, blob: Buffer.concat([sshString(Buffer.from(type)), sshString(Buffer.from(curve)), sshString(point)]) };
  }
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') {
    const type = 'ssh-ed25519';
    return { type, blob: Buffer.concat([sshString(Buffer.from(type)), sshString(b64u(jwk.x))]) };
  }
  throw unsupported(`key type ${jwk.kty}${jwk.crv ? ` ${jwk.crv}` : ''} has no OpenSSH form here`);
}

/**
 * The `authorized_keys` line of a public key, with an optional comment.
 *
 * @example
 *   opensshPublicKey(new X509Certificate(pem).publicKey, 'azure-certificate') // 'ssh-rsa AAAAB3NzaC1yc2E… azure-certificate'
 */
export function opensshPublicKey(key: KeyObject, comment = ''): string {
  const { type, blob } = sshPublicKeyBlob(key);
  return [type, blob.toString('base64'), comment].filter((part) => part.length > 0).join(' ');
}

function unsupported(problem: string): BootstateError {
  return new BootstateError('INVALID_SSH_KEY', `certificate key: ${problem}`, { data: [['problem', problem]] });
}
