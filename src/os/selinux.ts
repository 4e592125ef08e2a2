/**
 * SELinux labels of the files provisioning writes. A file made by a rename gets the label of a new file in its
 * directory, which is not always the one the policy gives that path: sshd in an enforcing policy reads
 * `authorized_keys` only when it is `ssh_home_t`. So on a system where SELinux is on (`selinuxenabled` exits 0),
 * each file written is given back its default label (`restorecon`); `~/.ssh` and the keys in it, when the policy
 * has no `ssh_home_t` rule for them (a home outside /home) or restorecon fails, get `ssh_home_t` directly with
 * `chcon`, the label WALinuxAgent sets. A label that cannot be set is a warning: the files are written, and a
 * permissive or disabled policy does not need it.
 *
 * Only for the running system (root `/`): a tree under another root is not labelled by this policy.
 */
import path from 'node:path';
import type { OsContext } from './backends.js';
import { firstLine, stderrOf, type Runner } from '../system/exec.js';

/** The label WALinuxAgent gives `authorized_keys` (and bootstate `~/.ssh` too) when the policy gives none. */
export const SSH_HOME_CONTEXT = 'unconfined_u:object_r:ssh_home_t:s0';

const enabled = new WeakMap<Runner, Promise<boolean>>();

/** Whether SELinux is on, asked once per runner (once per run): no selinuxenabled means no SELinux. */
function selinuxEnabled(context: OsContext, signal: AbortSignal): Promise<boolean> {
  if (context.root !== '/') return Promise.resolve(false);
  let answer = enabled.get(context.run);
  if (!answer) {
    answer = context.run(['selinuxenabled'], { signal, timeoutMs: 10_000, allowFailure: true }).then((r) => r.exitCode === 0, () => false);
    enabled.set(context.run, answer);
  }
  return answer;
}

/** Runs a labelling command; a missing command or a failure comes back as a result, never thrown. */
interface Outcome {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

async function attempt(context: OsContext, argv: string[], signal: AbortSignal): Promise<Outcome> {
  return context.run(argv, { signal, timeoutMs: 30_000, allowFailure: true }).catch((error: unknown) => ({ exitCode: -1, stdout: '', stderr: stderrOf(error) || (error as Error).message }));
}

const why = (result: Outcome) => firstLine(result.stderr) || `exit ${result.exitCode ?? 'by signal'}`;

/** Gives `paths` (and what is under them) their default labels; the warnings say what failed. */
export async function restoreContexts(paths: string[], context: OsContext, signal: AbortSignal): Promise<string[]> {
  if (paths.length === 0 || !(await selinuxEnabled(context, signal))) return [];
  const result = await attempt(context, ['restorecon', '-R', ...paths], signal);
  return result.exitCode === 0 ? [] : [`SELinux: restorecon ${paths.join(' ')} failed (${why(result)}): the files keep the label they were created with`];
}

/**
 * Labels the SSH files in a home: `restorecon -R` first; then each path the policy has no `ssh_home_t` rule for
 * (matchpathcon), or all of them when restorecon failed, gets SSH_HOME_CONTEXT with chcon.
 */
export async function labelSshHome(paths: string[], context: OsContext, signal: AbortSignal): Promise<string[]> {
  if (paths.length === 0 || !(await selinuxEnabled(context, signal))) return [];
  const restored = await attempt(context, ['restorecon', '-R', ...paths], signal);
  const warnings: string[] = [];
  for (const p of paths) {
    if (restored.exitCode === 0) {
      const rule = await attempt(context, ['matchpathcon', '-n', p], signal);
      if (rule.exitCode === 0 && /:ssh_home_t:/.test(rule.stdout)) continue;
    }
    const labelled = await attempt(context, ['chcon', SSH_HOME_CONTEXT, p], signal);
    if (labelled.exitCode !== 0) {
      const before = restored.exitCode === 0 ? '' : `restorecon failed (${why(restored)}), `;
      warnings.push(`SELinux: ${before}chcon ${SSH_HOME_CONTEXT} ${p} failed (${why(labelled)}): sshd in an enforcing policy may not read it`);
    }
  }
  return warnings;
}

/**
 * Which of the SSH files written for a user to label as SSH home files: `~/.ssh` and the keys file in it. A keys
 * file elsewhere keeps the policy's own label for its place (restoreContexts).
 */
export function sshHomePaths(keysFile: string, home: string): { sshHome: string[]; other: string[] } {
  const dir = path.posix.dirname(keysFile);
  const inHome = path.posix.relative(home, keysFile);
  if (inHome.startsWith('..') || path.posix.isAbsolute(inHome)) return { sshHome: [], other: [keysFile] };
  return { sshHome: path.posix.basename(dir) === '.ssh' ? [dir, keysFile] : [keysFile], other: [] };
}
