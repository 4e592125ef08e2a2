/**
 * Which of the SSH keys in the metadata get installed: every valid one. A `keyData` holding several lines is
 * several keys; an invalid or unsupported key is skipped and named (escaped) so the log, the journal and KVP say
 * why. Only when keys were given, none is usable and password logins are off does the VM fail: it would be
 * unreachable, and the failure names the keys.
 */
import { BootstateError, escapeValue, type SupportingData } from '../../core/errors.js';
import { validateSshKey } from '../validate.js';

export interface SkippedKey {
  /** The key line, escaped and shortened for logs and reports. */
  key: string;
  problem: string;
}

export interface KeySelection {
  /** Normalised authorized_keys lines, deduplicated, in metadata order; options kept verbatim. */
  keys: string[];
  skipped: SkippedKey[];
}

/** Signature algorithms that can use a key of each type (an RSA key signs with SHA-2 or, on old servers, SHA-1). */
const ALGORITHMS_FOR_TYPE: Record<string, string[]> = {
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
};

/** Whether sshd, accepting `algorithms` (its PubkeyAcceptedAlgorithms), can use a key of `type`. */
export function sshdAcceptsKeyType(type: string, algorithms: readonly string[]): boolean {
  return (ALGORITHMS_FOR_TYPE[type] ?? [type]).some((a) => algorithms.includes(a));
}

/**
 * Drops the keys of a type the image's sshd does not accept, with the same policy as selectSshKeys: each is
 * skipped and named, and when none remains while password logins are off, the VM fails naming them.
 */
export function keepKeysSshdAccepts(keys: string[], algorithms: readonly string[], passwordAuthentication: boolean): KeySelection {
  const kept: string[] = [];
  const skipped: SkippedKey[] = [];
  for (const key of keys) {
    const { type } = validateSshKey(key);
    if (sshdAcceptsKeyType(type, algorithms)) kept.push(key);
    else skipped.push({ key: escapeValue(key, 80), problem: `is of type ${type}, which this image's sshd does not accept (PubkeyAcceptedAlgorithms)` });
  }
  if (kept.length === 0 && skipped.length > 0 && !passwordAuthentication) throw noUsableKey(skipped);
  return { keys: kept, skipped };
}

/** The number of skipped keys a failure report names (a report value is bounded; the log names them all). */
const KEYS_NAMED_IN_REPORT = 4;

/** Splits every `keyData` into lines and keeps the valid keys, e.g. `selectSshKeys(['ssh-ed25519 AAAA… a\nbad'], true)`. */
export function selectSshKeys(keyData: string[], passwordAuthentication: boolean): KeySelection {
  const keys: string[] = [];
  const skipped: SkippedKey[] = [];
  for (const line of keyData.flatMap((data) => data.split(/\r?\n|\r/))) {
    const trimmed = line.trim();
    if (trimmed.length === 0 || trimmed.startsWith('#')) continue;
    try {
      const key = validateSshKey(trimmed).line;
      if (!keys.includes(key)) keys.push(key);
    } catch (error) {
      const problem = error instanceof BootstateError ? (new Map(error.data).get('problem') ?? error.message) : String(error);
      skipped.push({ key: escapeValue(trimmed, 80), problem });
    }
  }
  if (keys.length === 0 && skipped.length > 0 && !passwordAuthentication) throw noUsableKey(skipped);
  return { keys, skipped };
}

/** The failure of a VM left without a usable key while password logins are off, naming the skipped keys. */
export function noUsableKey(skipped: SkippedKey[]): BootstateError {
  const data: SupportingData = [['problem', 'no usable ssh key and password logins are off: the VM would be unreachable']];
  skipped.slice(0, KEYS_NAMED_IN_REPORT).forEach((s, i) => data.push([`key_${i + 1}`, s.key], [`key_${i + 1}_problem`, s.problem]));
  if (skipped.length > KEYS_NAMED_IN_REPORT) data.push(['keys_not_named', String(skipped.length - KEYS_NAMED_IN_REPORT)]);
  return new BootstateError('INVALID_SSH_KEY', `no usable ssh key (${skipped.map((s) => `${s.key}: ${s.problem}`).join('; ')}) and password logins are off`, { data });
}
