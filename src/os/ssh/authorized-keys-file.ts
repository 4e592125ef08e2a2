/**
 * Where sshd looks for a user's keys: `AuthorizedKeysFile` from sshd's effective configuration for that user,
 * with `%h %u %U %%` expanded and relative paths taken from the home directory (sshd_config(5)).
 */
import { hostname } from 'node:os';
import path from 'node:path';
import type { Runner } from '../../system/exec.js';
import { BootstateError, escapeValue } from '../../core/errors.js';
import { firstLine, isCommandMissing, stderrOf } from '../../system/exec.js';

export interface KeysFileContext {
  username: string;
  home: string;
  uid: number;
}

/**
 * Expands one AuthorizedKeysFile value (several paths) to absolute paths; throws SSH_KEYS_FAILED on an unknown
 * `%` token or a relative path that climbs out of the home directory.
 */
export function expandAuthorizedKeysFile(value: string, context: KeysFileContext): string[] {
  const invalid = (pattern: string, problem: string) =>
    new BootstateError('SSH_KEYS_FAILED', `AuthorizedKeysFile ${escapeValue(pattern)}: ${problem}`, {
      data: [['pattern', escapeValue(pattern)], ['problem', problem]],
    });
  return value
    .split(/\s+/)
    .filter((p) => p.length > 0)
    .map((p) => {
      const expanded = p.replace(/%(.?)/g, (_, token: string) => {
        switch (token) {
          case 'h':
            return context.home;
          case 'u':
            return context.username;
          case 'U':
            return String(context.uid);
          case '%':
            return '%';
          default:
            throw invalid(p, `unknown token %${escapeValue(token)}`);
        }
      });
      if (expanded.startsWith('/')) return path.posix.normalize(expanded);
      const resolved = path.posix.normalize(`${context.home}/${expanded}`);
      const home = path.posix.normalize(`${context.home}/`);
      if (!resolved.startsWith(home)) throw invalid(p, 'relative path leaves the home directory');
      return resolved;
    });
}

/** The value of `keyword` in `sshd -G`/`sshd -T` output (lower-case keywords, one per line), or null. */
export function sshdDumpValue(dump: string, keyword: string): string | null {
  const want = keyword.toLowerCase();
  for (const line of dump.split('\n')) {
    const [key, ...rest] = line.trim().split(/\s+/);
    if (key?.toLowerCase() === want) return rest.join(' ');
  }
  return null;
}

export interface ResolvedKeysFiles {
  paths: string[];
  source: string;
  warnings: string[];
  /** sshd's PubkeyAcceptedAlgorithms for the user (older: PubkeyAcceptedKeyTypes), or null when sshd did not say. */
  acceptedAlgorithms?: string[] | null;
}

export interface ResolveOptions extends KeysFileContext {
  run: Runner;
  sshdConfigPath: string;
  /** Path used when sshd cannot tell (config `ssh.authorized_keys_path`, relative to home). */
  fallback: string;
  querySshd: boolean;
  /** The dump flags to try in order (sshd-capability.ts); default `-G`, then `-T`. */
  dumpFlags?: readonly string[];
  signal?: AbortSignal;
}

/**
 * Asks sshd (`-G`, then `-T` for OpenSSH before 9.8 which lacks `-G`) for the user's AuthorizedKeysFile; falls
 * back to `fallback` with a warning when sshd is missing, fails, or says `none`.
 */
export async function resolveAuthorizedKeysFiles(options: ResolveOptions): Promise<ResolvedKeysFiles> {
  const warnings: string[] = [];
  const fallback = () => ({
    paths: expandAuthorizedKeysFile(options.fallback, options),
    source: 'fallback',
    warnings,
  });
  if (!options.querySshd) return fallback();
  const spec = `user=${options.username},host=${hostname()},addr=127.0.0.1`;
  // OpenSSH before 9.8 (Debian 12, Ubuntu 24.04) has no -G: its failure is news only when -T fails as well.
  const failures: string[] = [];
  for (const flag of options.dumpFlags ?? ['-G', '-T']) {
    const argv = ['sshd', flag, '-f', options.sshdConfigPath, '-C', spec];
    try {
      const result = await options.run(argv, { signal: options.signal, timeoutMs: 10_000 });
      const value = sshdDumpValue(result.stdout, 'authorizedkeysfile');
      if (value === null || value === 'none') {
        warnings.push(`sshd ${flag} reports AuthorizedKeysFile ${value ?? 'missing'}; using ${options.fallback}`);
        return fallback();
      }
      const algorithms = sshdDumpValue(result.stdout, 'pubkeyacceptedalgorithms') ?? sshdDumpValue(result.stdout, 'pubkeyacceptedkeytypes');
      return {
        paths: expandAuthorizedKeysFile(value, options),
        source: `sshd ${flag}`,
        warnings,
        acceptedAlgorithms: algorithms ? algorithms.split(',').filter(Boolean) : null,
      };
    } catch (error) {
      if (isCommandMissing(error)) {
        warnings.push(`sshd is not installed; using ${options.fallback}`);
        return fallback();
      }
      if (!(error instanceof BootstateError) || error.code !== 'SSH_KEYS_FAILED') {
        failures.push(`sshd ${flag} failed (${firstLine(stderrOf(error))})`);
        continue;
      }
      warnings.push(`${error.message}; using ${options.fallback}`);
      return fallback();
    }
  }
  warnings.push(...failures, `could not query sshd; using ${options.fallback}`);
  return fallback();
}
