/**
 * Each OS step tries its configured backends in order (as azure-init does); the first that succeeds wins and
 * the failure of the whole step names the step and the last backend's error.
 */
import { BootstateError, type ErrorCode } from '../core/errors.js';
import type { Runner } from '../system/exec.js';
import type { StepResult } from './provisioner.js';

/** What every backend needs: where `/` is and how to run a command. */
export interface OsContext {
  root: string;
  run: Runner;
  /** Owner of the system files we write (root; the scratch backend uses the current user). */
  rootOwner: { uid: number; gid: number };
}

/**
 * Errors no other backend can fix, so they pass through unwrapped: bad input (exit 78) and a user that does not
 * exist (OS state, exit 1: `--only ssh-keys` on a VM whose user was never created).
 */
const INPUT_ERRORS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'INVALID_USERNAME', 'INVALID_HOSTNAME', 'INVALID_SSH_KEY', 'PASSWORD_TOO_LONG', 'USER_MISSING',
]);

export type Backend<A> = (args: A, context: OsContext, signal: AbortSignal) => Promise<StepResult>;

/** Runs `args` through the backends named in `names`, in order; throws `code` naming `step` when all fail. */
export async function tryBackends<A>(
  step: string,
  code: ErrorCode,
  names: string[],
  table: Record<string, Backend<A>>,
  args: A,
  context: OsContext,
  signal: AbortSignal,
): Promise<StepResult> {
  const skipped: string[] = [];
  let last: { backend: string; error: unknown } | null = null;
  for (const name of names) {
    const backend = Object.hasOwn(table, name) ? table[name] : undefined;
    if (!backend) {
      last = { backend: name, error: new Error(`unknown ${step} backend ${name}`) };
      skipped.push(`${step}: unknown backend ${name}`);
      continue;
    }
    try {
      const result = await backend(args, context, signal);
      const warnings = [...skipped, ...(result.warnings ?? [])];
      return warnings.length ? { ...result, warnings } : result;
    } catch (error) {
      // Bad input is not a backend failure: no other backend can fix it.
      if (error instanceof BootstateError && INPUT_ERRORS.has(error.code)) throw error;
      if (signal.aborted) throw error;
      last = { backend: name, error };
      skipped.push(`${step}: backend ${name} failed: ${(error as Error).message}`);
    }
  }
  if (!last) throw new BootstateError(code, `${step}: no backends configured`, { data: [['step', step]] });
  const message = last.error instanceof Error ? last.error.message : String(last.error);
  const inner = last.error instanceof BootstateError ? last.error.data.filter(([k]) => k !== 'step' && k !== 'backend') : [];
  throw new BootstateError(code, `${step} failed: ${last.backend}: ${message}`, {
    data: [['step', step], ['backend', last.backend], ...(inner.length ? inner : [['error', message] as [string, string]])],
    cause: last.error,
  });
}
