/**
 * SSH host keys of this VM's own. An image carries the host keys of the machine it was captured from: every VM
 * cloned from it would answer with that one identity. On the first boot of a new VM id the image's keys
 * (`ssh_host_*_key` and `.pub` in the key directory) are replaced by new ones of the configured types, and their
 * fingerprints are printed to the console between the markers cloud-init uses, so the owner can check the first
 * connection against the boot diagnostics.
 *
 * Each key is generated under a temporary name first; only when at least one type was generated are the image's
 * keys removed and the new ones renamed into place, so a failed `ssh-keygen` never leaves sshd without a key. A type
 * that fails is a warning naming it.
 */
import type * as Crypto from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError } from '../../core/errors.js';
import type { OsContext } from '../backends.js';
import { isCommandMissing } from '../../system/exec.js';
import { removeOnExit } from '../../system/exit-cleanup.js';
import { under } from '../../system/paths.js';
import type { StepResult } from '../provisioner.js';

export const HOST_KEY_TYPES = ['rsa', 'ecdsa', 'ed25519'] as const;
export type HostKeyType = (typeof HOST_KEY_TYPES)[number];

/** An image's key files: `ssh_host_<type>_key` and its `.pub`. */
export const HOST_KEY_FILE = /^ssh_host_[A-Za-z0-9]+_key(\.pub)?$/;
/** node:crypto on first use: loading it costs a start milliseconds, and only a run that made keys hashes them. */
const crypto = (): typeof Crypto => process.getBuiltinModule('node:crypto');

/** How long one `ssh-keygen` may take. */
export const KEYGEN_TIMEOUT_SECS = 60;

/** Temporary names begin with a dot: neither sshd's defaults nor the pattern above ever match one. */
const tempName = (type: string) => `.bootstate-new-ssh_host_${type}_key`;

export interface HostKey {
  type: HostKeyType;
  /** `ssh-keygen -l` style: bits, `SHA256:…`, comment, `(TYPE)`. */
  fingerprint: string;
  /** The public key line. */
  publicKey: string;
}

/** The host key step's result: the types left for `addHostKeys`, made in the background. */
export interface HostKeysResult extends StepResult {
  later: HostKeyType[];
}

type Fresh = { type: HostKeyType; temp: string; publicKey: string };

/** The temporary names of `types` in `dir`: each private key and its `.pub`. */
const tempFiles = (dir: string, types: readonly HostKeyType[]) =>
  types.flatMap((type) => [path.join(dir, tempName(type)), path.join(dir, `${tempName(type)}.pub`)]);

/**
 * Runs `work` with the temporary names of `types` in `dir` registered for removal: whatever is left under them when
 * it ends — keys of a run that failed, was aborted, or is exiting — is removed. Keys renamed into place are gone from
 * there already.
 */
async function withTempKeys<T>(dir: string, types: readonly HostKeyType[], work: () => Promise<T>): Promise<T> {
  const temps = tempFiles(dir, types);
  const forget = temps.map((temp) => removeOnExit(temp));
  try {
    return await work();
  } finally {
    await Promise.all(temps.map((temp) => rm(temp, { force: true }).catch(() => undefined)));
    for (const f of forget) f();
  }
}

/**
 * Generates `types` side by side under temporary names (inside withTempKeys); a type that fails is a warning, not a
 * throw. Every `ssh-keygen` has ended when it returns, or throws because `signal` was aborted.
 */
async function generate(dir: string, types: HostKeyType[], context: OsContext, signal: AbortSignal, nice?: number) {
  const warnings: string[] = [];
  let missing = false;
  const generated = await Promise.all(
    types.map(async (type): Promise<Fresh | null> => {
      const temp = path.join(dir, tempName(type));
      await rm(temp, { force: true });
      await rm(`${temp}.pub`, { force: true });
      try {
        await context.run(['ssh-keygen', '-q', '-t', type, '-N', '', '-C', '', '-f', temp], { signal, timeoutMs: KEYGEN_TIMEOUT_SECS * 1000, nice });
        const publicKey = (await readFile(`${temp}.pub`, 'utf8')).trim();
        return { type, temp, publicKey };
      } catch (error) {
        // What a failed ssh-keygen left under the temporary names goes when the step ends (withTempKeys).
        if (signal.aborted) return null;
        if (isCommandMissing(error)) missing = true;
        warnings.push(`host key ${type} not generated: ${(error as Error).message}`);
        return null;
      }
    }),
  );
  signal.throwIfAborted();
  return { fresh: generated.filter((g): g is Fresh => g !== null), warnings, missing };
}

/** Renames each new key into place, root-owned, 0600 (private) and 0644 (public). */
async function install(dir: string, fresh: Fresh[], context: OsContext): Promise<void> {
  for (const { type, temp } of fresh) {
    const key = path.join(dir, `ssh_host_${type}_key`);
    for (const [from, to, mode] of [[temp, key, 0o600], [`${temp}.pub`, `${key}.pub`, 0o644]] as const) {
      await chown(from, context.rootOwner.uid, context.rootOwner.gid);
      await chmod(from, mode);
      await rename(from, to);
    }
  }
}

function installError(dir: string, error: unknown): BootstateError {
  return new BootstateError('HOST_KEYS_FAILED', `cannot install the new ssh host keys in ${dir}: ${(error as Error).message}`, {
    data: [['path', dir], ['error', (error as Error).message]],
    cause: error,
  });
}

const hostKey = (type: HostKeyType, publicKey: string): HostKey => ({ type, publicKey, fingerprint: fingerprintOf(publicKey) });
const keysOf = (fresh: Fresh[]): HostKey[] => fresh.map(({ type, publicKey }) => hostKey(type, publicKey));

/**
 * Replaces the host keys in `dir` (under the context's root) by new ones of `types`. They carry no comment: they are
 * made before the VM's hostname is known (while IMDS is asked), and a comment naming the image's would mislead.
 * Types in `later` are not made now but returned, for `addHostKeys` in the background (all of the image's keys are
 * removed all the same); when every type is in `later`, all are made now. The console block of fingerprints
 * is printed once every key exists: here when nothing is left for later.
 */
export async function regenerateHostKeys(
  request: { dir: string; types: readonly HostKeyType[]; later?: readonly HostKeyType[] },
  context: OsContext,
  signal: AbortSignal,
): Promise<HostKeysResult> {
  const dir = under(context.root, request.dir);
  if (!existsSync(dir)) return { backend: 'none', detail: `${dir} does not exist: no ssh host keys to replace`, later: [] };
  const types = [...new Set(request.types)];
  const deferred = types.filter((t) => request.later?.includes(t));
  const later = deferred.length < types.length ? deferred : [];
  const now = types.filter((t) => !later.includes(t));
  return withTempKeys(dir, now, () => replace(dir, now, later, context, signal));
}

/** Makes `now` under temporary names, then puts them in place of every key of the image's. */
async function replace(dir: string, now: HostKeyType[], later: HostKeyType[], context: OsContext, signal: AbortSignal): Promise<HostKeysResult> {
  const { fresh, warnings, missing } = await generate(dir, now, context, signal);
  // openssh-server brings ssh-keygen: without it there is no sshd whose keys could be shared.
  if (missing) return { backend: 'none', detail: 'ssh-keygen is not installed: the ssh host keys are left as they are', warnings: ['ssh-keygen is not installed; ssh host keys not replaced'], later: [] };
  if (fresh.length === 0) {
    throw new BootstateError('HOST_KEYS_FAILED', `no ssh host key could be generated in ${dir}: ${warnings.join('; ')}`, {
      data: [['path', dir], ['error', warnings.join('; ')]],
    });
  }
  signal.throwIfAborted();
  let removed: string[];
  try {
    removed = (await readdir(dir)).filter((name) => HOST_KEY_FILE.test(name));
    for (const name of removed) await rm(path.join(dir, name), { force: true });
    await install(dir, fresh, context);
  } catch (error) {
    throw installError(dir, error);
  }
  const keys = keysOf(fresh);
  const replaced = removed.filter((n) => !n.endsWith('.pub')).length;
  const rest = later.length ? `; ${later.join(', ')} on its way (logins do not wait for it)` : '';
  return {
    backend: 'ssh-keygen',
    detail: `new ssh host keys (${replaced} of the image's replaced): ${keys.map((k) => k.fingerprint).join(', ')}${rest}`,
    warnings,
    ...(later.length ? {} : { console: fingerprintBlock(keys) }),
    later,
  };
}

/**
 * Adds host keys of `types` to `dir` once logins may start (an sshd already running reads them on its next
 * connection), at the lowest CPU priority (nice 19): sshd's start and the first login come first. Nothing here
 * fails the run: sshd already has keys, so a type that cannot be made is a warning. Then the console block of every
 * key of `all` in `dir`.
 */
export async function addHostKeys(
  request: { dir: string; types: readonly HostKeyType[]; all: readonly HostKeyType[]; nice?: number },
  context: OsContext,
  signal: AbortSignal,
): Promise<StepResult> {
  const dir = under(context.root, request.dir);
  const types = [...new Set(request.types)];
  const { fresh, warnings, installed } = await withTempKeys(dir, types, async () => {
    const made = await generate(dir, types, context, signal, request.nice ?? 19);
    try {
      await install(dir, made.fresh, context);
      return { ...made, installed: true };
    } catch (error) {
      return { ...made, warnings: [...made.warnings, installError(dir, error).message], installed: false };
    }
  });
  if (!installed) return { backend: 'ssh-keygen', detail: 'no ssh host key added', warnings };
  const keys: HostKey[] = [];
  for (const type of new Set(request.all)) {
    const publicKey = (await readFile(path.join(dir, `ssh_host_${type}_key.pub`), 'utf8').catch(() => '')).trim();
    if (publicKey) keys.push(hostKey(type, publicKey));
  }
  const added = keysOf(fresh);
  return {
    backend: 'ssh-keygen',
    detail: added.length ? `ssh host keys added: ${added.map((k) => k.fingerprint).join(', ')}` : 'no ssh host key added',
    warnings,
    console: fingerprintBlock(keys),
  };
}

/**
 * On a boot that only reports Ready (the report-pending marker): makes the types of `types` whose key or public key
 * is missing from `dir`. The earlier boot replaced the image's keys and configured the OS, and may have been stopped
 * before the keys it left for the background were made; a type missing there is one of those. Made at normal
 * priority, before sshd starts; one that cannot be made is a warning, as in the background.
 */
export async function completeHostKeys(
  request: { dir: string; types: readonly HostKeyType[] },
  context: OsContext,
  signal: AbortSignal,
): Promise<StepResult> {
  const dir = under(context.root, request.dir);
  if (!existsSync(dir)) return { backend: 'none', detail: `${dir} does not exist: no ssh host keys to complete` };
  // Whatever a killed run left under a temporary name is not a key anyone uses.
  await Promise.all(tempFiles(dir, HOST_KEY_TYPES).map((temp) => rm(temp, { force: true })));
  const names = new Set(await readdir(dir));
  const missing = [...new Set(request.types)].filter((t) => !names.has(`ssh_host_${t}_key`) || !names.has(`ssh_host_${t}_key.pub`));
  if (missing.length === 0) return { backend: 'none', detail: 'every ssh host key is in place' };
  return addHostKeys({ dir: request.dir, types: missing, all: request.types, nice: 0 }, context, signal);
}

/**
 * The block printed to the console: fingerprints, then the public keys, each between BEGIN/END marker lines (the
 * layout cloud-init prints, which tools that read boot diagnostics look for).
 */
export function fingerprintBlock(keys: HostKey[]): string {
  return [
    '-----BEGIN SSH HOST KEY FINGERPRINTS-----',
    ...keys.map((k) => k.fingerprint),
    '-----END SSH HOST KEY FINGERPRINTS-----',
    '-----BEGIN SSH HOST KEY KEYS-----',
    ...keys.map((k) => k.publicKey),
    '-----END SSH HOST KEY KEYS-----',
    '',
  ].join('\n');
}

/** `256 SHA256:<base64, unpadded> <comment> (ED25519)`, as `ssh-keygen -l` prints it, computed from the key line. */
export function fingerprintOf(publicKey: string): string {
  const [type = '', base64 = '', ...comment] = publicKey.trim().split(/\s+/);
  const blob = Buffer.from(base64, 'base64');
  const digest = crypto().createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
  const label = type === 'ssh-ed25519' ? 'ED25519' : type.startsWith('ecdsa-') ? 'ECDSA' : type === 'ssh-rsa' ? 'RSA' : type.toUpperCase();
  return `${keyBits(type, blob)} SHA256:${digest} ${comment.join(' ') || 'no comment'} (${label})`;
}

/** The key size in bits from its wire form (RFC 4253 §6.6): the modulus of RSA, the curve of ECDSA. */
function keyBits(type: string, blob: Buffer): number {
  if (type === 'ssh-ed25519') return 256;
  const curve = /^ecdsa-sha2-nistp(\d+)$/.exec(type);
  if (curve) return Number(curve[1]);
  if (type === 'ssh-rsa') {
    const fields: Buffer[] = [];
    for (let at = 0; at + 4 <= blob.length && fields.length < 3; ) {
      const length = blob.readUInt32BE(at);
      fields.push(blob.subarray(at + 4, at + 4 + length));
      at += 4 + length;
    }
    const modulus = fields[2] ?? Buffer.alloc(0);
    let first = 0;
    while (first < modulus.length && modulus[first] === 0) first++;
    if (first === modulus.length) return 0;
    return (modulus.length - first - 1) * 8 + (32 - Math.clz32(modulus[first]!));
  }
  return 0;
}
