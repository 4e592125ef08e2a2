/**
 * `bootstate deprovision [--user] [--waagent-state] [--root DIR] [--force]`: generalizes an image for capture, as
 * `waagent -deprovision[+user]` and `cloud-init clean --machine-id` do for theirs. It first lists every change,
 * then asks on a terminal (y/N); without a terminal it changes nothing unless `--force` says so (exit 2), because a
 * deprovisioned VM cannot be logged into the same way again. What it refuses to touch (a symlink where a file of
 * bootstate's was) it names, and the run then exits 1: the image is not ready for capture.
 */
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import { EXIT_USAGE } from '../cli/argv.js';
import { checkRoot } from '../cli/options.js';
import { SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE } from '../config/defaults.js';
import { loadConfig } from '../config/load.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { applyChange, describeChange } from '../deprovision/apply.js';
import { planDeprovision } from '../deprovision/plan.js';

export interface DeprovisionIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Whether stdin is a terminal someone can answer on. */
  isTerminal: boolean;
  /** Asks `question` on the terminal and resolves to the answer. */
  ask(question: string): Promise<string>;
}

/** The process's own streams: asks on stderr, so stdout stays the list of changes. */
export function terminalIo(stdio: Pick<DeprovisionIo, 'stdout' | 'stderr'>): DeprovisionIo {
  return {
    ...stdio,
    isTerminal: process.stdin.isTTY === true,
    ask: async (question) => {
      const terminal = createInterface({ input: process.stdin, output: process.stderr });
      try {
        return await terminal.question(question);
      } finally {
        terminal.close();
      }
    },
  };
}

export interface DeprovisionOptions {
  root?: string;
  user?: boolean;
  /** Also WALinuxAgent's state (the contents of /var/lib/waagent and /var/log/azure, its log). */
  waagentState?: boolean;
  force?: boolean;
}

/**
 * Runs `deprovision` and resolves to the exit code: 0 when every change was made (or none was needed), 1 when
 * one failed or the operator declined, 2 when confirmation was needed and could not be asked.
 * @throws UsageError when the root does not exist or is not a directory.
 */
export async function runDeprovision(values: DeprovisionOptions, io: DeprovisionIo): Promise<number> {
  const root = path.resolve(values.root ?? '/');
  await checkRoot(root);
  const onThisSystem = root === '/';
  // The image's own configuration says where its data dir, log, KVP pool, host keys and sudoers drop-ins are.
  const { config } = await loadConfig({
    root,
    systemFile: SYSTEM_CONFIG_FILE,
    dropinDir: SYSTEM_CONFIG_DROPIN_DIR,
    ...(onThisSystem ? {} : { override: '', env: {} }),
  });
  const plan = await planDeprovision(root, config, { user: values.user === true, waagentState: values.waagentState === true });
  const where = onThisSystem ? 'this system' : `the image at ${root}`;
  for (const note of plan.notes) io.stdout(`note: ${note}\n`);
  for (const refusal of plan.refused) io.stderr(`bootstate deprovision: refused: ${refusal}\n`);
  if (plan.changes.length === 0) {
    io.stdout(`bootstate deprovision: nothing to do on ${where}\n`);
    return plan.refused.length > 0 ? notReady(io, plan.refused.length) : EXIT_OK;
  }
  io.stdout(`bootstate deprovision will change ${where}:\n`);
  for (const change of plan.changes) io.stdout(`  ${describeChange(root, change)}\n`);
  if (values.force !== true) {
    if (!io.isTerminal) {
      io.stderr('bootstate deprovision: stdin is not a terminal, so the changes above cannot be confirmed; nothing was changed. Add --force to make them without asking.\n');
      return EXIT_USAGE;
    }
    const answer = await io.ask(`Deprovision ${where}? It cannot be undone${onThisSystem ? ' and this VM should be shut down and captured right after' : ''}. [y/N] `);
    if (!/^\s*y(es)?\s*$/i.test(answer)) {
      io.stdout('bootstate deprovision: not confirmed; nothing was changed\n');
      return EXIT_FAILURE;
    }
  }
  let failed = 0;
  for (const change of plan.changes) {
    if (change.kind === 'remove' && change.proof && failed > 0) {
      io.stderr(`bootstate deprovision: kept ${describeChange(root, change).replace(/^remove /, '')}: a change above failed, and a second run needs it\n`);
      continue;
    }
    try {
      for (const line of await applyChange(root, change)) io.stdout(`${line}\n`);
    } catch (error) {
      failed++;
      io.stderr(`bootstate deprovision: cannot ${describeChange(root, change)}: ${(error as Error).message}\n`);
    }
  }
  if (failed > 0) {
    io.stderr(`bootstate deprovision: ${failed} of ${plan.changes.length} changes failed; the image is not ready for capture\n`);
    return EXIT_FAILURE;
  }
  if (plan.refused.length > 0) return notReady(io, plan.refused.length);
  io.stdout(`bootstate deprovision: ${where} is ready for capture${onThisSystem ? ': shut it down now (a boot of it provisions it as a new VM)' : ''}\n`);
  return EXIT_OK;
}

function notReady(io: DeprovisionIo, refused: number): number {
  io.stderr(`bootstate deprovision: ${refused} thing(s) refused (above); the image is not ready for capture\n`);
  return EXIT_FAILURE;
}
