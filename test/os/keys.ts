/** Builds syntactically valid OpenSSH public key lines for tests (random key material, real wire format). */
import { randomBytes } from 'node:crypto';

function sshString(data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  return Buffer.concat([length, data]);
}

/** A key line `type base64 [comment]` whose blob names `blobType` (default: the same type). */
export function keyLine(type = 'ssh-ed25519', comment: string | null = 'user@host', blobType = type): string {
  const blob = Buffer.concat([sshString(Buffer.from(blobType)), sshString(randomBytes(32))]);
  return [type, blob.toString('base64'), comment].filter((p) => p !== null).join(' ');
}
