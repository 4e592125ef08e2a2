import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { opensshPublicKey, sshPublicKeyBlob } from '../../../src/os/certificates/openssh-key.js';
import { validateSshKey } from '../../../src/os/validate.js';

const dir = mkdtempSync(path.join(tmpdir(), 'openssh-key-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What OpenSSH itself makes of the key: `ssh-keygen -i -m PKCS8` on its SPKI PEM. */
function sshKeygenLine(key: KeyObject): string {
  const file = path.join(dir, 'key.pem');
  writeFileSync(file, key.export({ type: 'spki', format: 'pem' }));
  return execFileSync('ssh-keygen', ['-i', '-m', 'PKCS8', '-f', file], { encoding: 'utf8' }).trim();
}

const KINDS = [
  () => generateKeyPairSync('rsa', { modulusLength: 1024 + 8 * Math.floor(Math.random() * 64) }).publicKey,
  () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey,
  () => generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey,
  () => generateKeyPairSync('ec', { namedCurve: 'P-521' }).publicKey,
];

describe('opensshPublicKey', () => {
  it('writes RSA and NIST ECDSA keys exactly as ssh-keygen does', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: KINDS.length - 1 }), (kind) => {
        const key = KINDS[kind]!();
        expect(opensshPublicKey(key)).toBe(sshKeygenLine(key));
      }),
      { numRuns: 24 },
    );
  });

  it('writes RSA exponents and moduli of any top bit as minimal mpints (a set top bit gets a zero byte)', () => {
    fc.assert(
      fc.property(fc.constantFrom(3, 17, 65537, 0x80000001), (e) => {
        const key = generateKeyPairSync('rsa', { modulusLength: 1024, publicExponent: e }).publicKey;
        expect(opensshPublicKey(key)).toBe(sshKeygenLine(key));
      }),
      { numRuns: 4 },
    );
  });

  it('writes Ed25519 keys as the type and the 32 raw key bytes of RFC 8709', () => {
    const key = generateKeyPairSync('ed25519').publicKey;
    const line = opensshPublicKey(key, 'from-certificate');
    expect(validateSshKey(line).type).toBe('ssh-ed25519');
    const raw = key.export({ type: 'spki', format: 'der' }).subarray(-32);
    const blob = Buffer.from(line.split(' ')[1]!, 'base64');
    expect(blob).toEqual(Buffer.concat([Buffer.from([0, 0, 0, 11]), Buffer.from('ssh-ed25519'), Buffer.from([0, 0, 0, 32]), raw]));
    const file = path.join(dir, 'ed.pub');
    writeFileSync(file, `${line}\n`);
    expect(execFileSync('ssh-keygen', ['-l', '-f', file], { encoding: 'utf8' })).toMatch(/^256 SHA256:\S+ from-certificate \(ED25519\)/);
  });

  it('passes the project validator and keeps the comment last', () => {
    const line = opensshPublicKey(KINDS[1]!(), 'azure-ABCDEF');
    expect(line).toMatch(/^ecdsa-sha2-nistp256 \S+ azure-ABCDEF$/);
    expect(validateSshKey(line).line).toBe(line);
  });

  it('refuses a private key and a key OpenSSH has no form for, as INVALID_SSH_KEY', () => {
    const pair = generateKeyPairSync('x25519');
    expect(() => sshPublicKeyBlob(pair.privateKey)).toThrow(expect.objectContaining({ code: 'INVALID_SSH_KEY' }));
    expect(() => sshPublicKeyBlob(pair.publicKey)).toThrow(expect.objectContaining({ code: 'INVALID_SSH_KEY' }));
  });
});
