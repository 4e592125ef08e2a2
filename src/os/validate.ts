/**
 * Validation of values that come from metadata and end up in commands or files: usernames, hostnames, SSH
 * public keys and the password length. Every rejection is a BootstateError whose data says why and carries
 * the offending value escaped — except the password, which is never echoed.
 *
 * Decisions: a username is what Azure's API and shadow's useradd both accept — upper case and dots included
 * (`AzureAdmin`, `john.doe`), ≤ 32 bytes — minus what is unsafe wherever the name is used: a leading `-`
 * (option), `:` `/` `,` (passwd fields, paths, lists), blanks and control characters, `.` and `..`, digits only
 * (read as a uid). Whatever is derived from the name (the sudoers drop-in's file name) is made safe where it is
 * derived. Hostnames are validated whole (RFC 1123, ≤ 253) and the machine is given the first label.
 */
import { readFile } from 'node:fs/promises';
import { BootstateError, escapeValue } from '../core/errors.js';

export const MAX_USERNAME_LENGTH = 32;
export const MAX_PASSWORD_LENGTH = 72;

/** Accounts that are never a VM owner's admin user, whether or not this image has them. */
export const RESERVED_USERNAMES: ReadonlySet<string> = new Set([
  'root', 'daemon', 'bin', 'sys', 'sync', 'games', 'man', 'lp', 'mail', 'news', 'uucp', 'proxy', 'www-data',
  'backup', 'list', 'irc', 'gnats', 'nobody', 'sshd', 'messagebus', 'systemd-network', 'systemd-resolve',
  'systemd-timesync', 'polkitd', '_apt', 'halt', 'shutdown', 'operator', 'adm', 'ftp',
]);

/** Characters shadow's useradd accepts in a name (plus one trailing `$` for machine accounts). */
const USERNAME = /^[A-Za-z0-9_.-]+\$?$/;

export interface UsernameOptions {
  /** passwd file to look for existing system accounts (uid below UID_MIN or above UID_MAX). */
  passwdFile?: string;
  uidMin?: number;
  uidMax?: number;
}

/** Throws INVALID_USERNAME unless `name` is a safe, non-system user name, e.g. `azureuser`, `AzureAdmin`, `john.doe`. */
export async function validateUsername(name: string, options: UsernameOptions = {}): Promise<string> {
  const why = usernameProblem(name);
  if (why) throw invalidUsername(name, why);
  if (options.passwdFile) {
    const entry = (await readPasswd(options.passwdFile)).find((e) => e.name === name);
    const min = options.uidMin ?? 1000;
    const max = options.uidMax ?? 60000;
    if (entry && (entry.uid < min || entry.uid > max)) {
      throw invalidUsername(name, `is an existing system account (uid ${entry.uid})`);
    }
  }
  return name;
}

/** The syntactic check behind validateUsername: a reason string, or null when the name is acceptable. */
export function usernameProblem(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (Buffer.byteLength(name, 'utf8') > MAX_USERNAME_LENGTH) return `is longer than ${MAX_USERNAME_LENGTH} bytes`;
  if (name.startsWith('-')) return 'starts with a hyphen';
  if (/[\x00-\x1f\x7f]/.test(name)) return 'contains control characters';
  if (/\s/.test(name)) return 'contains whitespace';
  if (/[:/,]/.test(name)) return 'contains ":", "/" or ","';
  if (name === '.' || name === '..') return 'is a directory name';
  if (/^[0-9]+$/.test(name)) return 'is only digits (it would read as a uid)';
  if (!USERNAME.test(name)) return 'is not a user name (letters, digits, ".", "_", "-", optional trailing $)';
  if (RESERVED_USERNAMES.has(name)) return 'is a reserved system account';
  return null;
}

function invalidUsername(name: string, why: string): BootstateError {
  return new BootstateError('INVALID_USERNAME', `username ${escapeValue(name)} ${why}`, {
    data: [['username', escapeValue(name)], ['problem', why]],
  });
}

const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/** Throws INVALID_HOSTNAME unless `name` is an RFC 1123 host name (labels ≤ 63, total ≤ 253), e.g. `web-01`. */
export function validateHostname(name: string): string {
  const why = hostnameProblem(name);
  if (why) {
    throw new BootstateError('INVALID_HOSTNAME', `hostname ${escapeValue(name)} ${why}`, {
      data: [['hostname', escapeValue(name)], ['problem', why]],
    });
  }
  return name;
}

/** The check behind validateHostname: a reason string, or null when the name is acceptable. */
export function hostnameProblem(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (name.length > 253) return 'is longer than 253 characters';
  const labels = name.endsWith('.') ? name.slice(0, -1).split('.') : name.split('.');
  for (const label of labels) {
    if (label.length === 0) return 'has an empty label';
    if (label.length > 63) return 'has a label longer than 63 characters';
    if (!LABEL.test(label)) return 'has a label that is not letters, digits and inner hyphens';
  }
  return null;
}

/** The name given to the machine: the first label, so it fits the kernel's 64-byte limit and /etc/hostname. */
export function machineHostname(validated: string): string {
  return validated.split('.')[0]!;
}

/** Throws PASSWORD_TOO_LONG when the password exceeds 72 characters; the error never contains the value. */
export function validatePassword(password: string): void {
  const length = [...password].length;
  if (length > MAX_PASSWORD_LENGTH) {
    throw new BootstateError('PASSWORD_TOO_LONG', `password is longer than ${MAX_PASSWORD_LENGTH} characters`, {
      data: [['length', String(length)], ['max_length', String(MAX_PASSWORD_LENGTH)]],
    });
  }
}

export const SSH_KEY_TYPES: ReadonlySet<string> = new Set([
  'ssh-rsa', 'ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521',
  'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com',
]);

export interface SshKey {
  /** The normalised line written to authorized_keys. */
  line: string;
  options: string | null;
  type: string;
  base64: string;
  comment: string | null;
}

/** Parses one OpenSSH authorized_keys line (`[options] type base64 [comment]`), or throws INVALID_SSH_KEY. */
export function validateSshKey(input: string): SshKey {
  const line = input.replace(/[\r\n]/g, '').trim();
  const fail = (why: string) =>
    new BootstateError('INVALID_SSH_KEY', `ssh key ${escapeValue(line)} ${why}`, {
      data: [['key', escapeValue(line)], ['problem', why]],
    });
  if (line.length === 0) throw fail('is empty');
  if (/[\x00-\x08\x0b-\x1f\x7f]/.test(line)) throw fail('contains control characters');
  let rest = line;
  let options: string | null = null;
  if (!SSH_KEY_TYPES.has(firstToken(rest))) {
    const end = endOfOptions(rest);
    if (end === null) throw fail('has an unterminated quoted option');
    options = rest.slice(0, end);
    rest = rest.slice(end).trimStart();
  }
  const [type = '', base64 = '', ...comment] = rest.split(/[ \t]+/);
  if (!SSH_KEY_TYPES.has(type)) throw fail('does not name a known key type');
  if (!base64) throw fail('has no key data');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) throw fail('key data is not base64');
  const blob = Buffer.from(base64, 'base64');
  if (blob.length < 4) throw fail('key data is too short');
  const nameLength = blob.readUInt32BE(0);
  if (nameLength > blob.length - 4) throw fail('key data is truncated');
  if (blob.subarray(4, 4 + nameLength).toString('latin1') !== type) throw fail('key data names a different type');
  const commentText = comment.length ? comment.join(' ') : null;
  const normal = [options, type, base64, commentText].filter((p) => p !== null).join(' ');
  return { line: normal, options, type, base64, comment: commentText };
}

function firstToken(s: string): string {
  return s.split(/[ \t]/, 1)[0] ?? '';
}

/** Index just past the options field: the first blank outside double quotes (`\"` escapes a quote). */
function endOfOptions(s: string): number | null {
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (ch === '\\' && quoted) i++;
    else if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === ' ' || ch === '\t')) return i;
  }
  return quoted ? null : s.length;
}

export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** The password field of `name` in the text of a shadow(5) file, or undefined when it has no entry. */
export function shadowHash(shadow: string | null, name: string): string | undefined {
  return shadow?.split('\n').find((line) => line.startsWith(`${name}:`))?.split(':')[1];
}

/** Parses a passwd(5) file; a missing file reads as empty. */
export async function readPasswd(file: string): Promise<PasswdEntry[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return text.split('\n').flatMap((line) => {
    const f = line.split(':');
    if (f.length < 7 || line.startsWith('#')) return [];
    return [{ name: f[0]!, uid: Number(f[2]), gid: Number(f[3]), home: f[5]!, shell: f[6]! }];
  });
}
