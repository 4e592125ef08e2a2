/** `bootstate provision`: maps the parsed options onto `runProvision`, prints what a dry run did, returns the exit code. */
import { mkdirSync, realpathSync } from 'node:fs';
import type { ParsedArgs } from '../cli/argv.js';
import { UsageError } from '../cli/argv.js';

/** `--groups a,b --groups c` and `BOOTSTATE_USER_GROUPS=a,b` (the flag wins) → `['a','b','c']`. */
export function parseGroups(flags: string[] | undefined, env: string | undefined): string[] {
  const raw = flags && flags.length > 0 ? flags : env ? [env] : [];
  return raw.flatMap((g) => g.split(',')).map((g) => g.trim()).filter(Boolean);
}

export async function provisionCommand(values: ParsedArgs['values']): Promise<number> {
  const dryRun = values['dry-run'] as string | undefined;
  const scratch = values.scratch as string | undefined;
  if (dryRun !== undefined && scratch !== undefined) throw new UsageError('--dry-run and --scratch exclude each other');
  const dir = dryRun ?? scratch;
  if (dir !== undefined) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const root = dir === undefined ? undefined : realpathSync(dir);
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const { selectSteps } = await import('../config/steps.js');
  let steps;
  try {
    steps = selectSteps(values.only as string[] | undefined, values.skip as string[] | undefined);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { runProvision } = await import('../provision/provision.js');
  const { shellCommand, listFiles } = dryRun !== undefined ? await import('../logging/run-output.js') : ({} as never);
  const { statePrinter } = dryRun !== undefined ? await import('../observe/console.js') : ({} as never);
  if (dryRun !== undefined) out(`bootstate dry run into ${root}: metadata is read, nothing outside this directory changes, no health report is sent\n`);
  const result = await runProvision({
    configPath: values.config as string | undefined,
    groups: parseGroups(values.groups as string[] | undefined, process.env.BOOTSTATE_USER_GROUPS),
    scratchDir: root,
    dryRun: dryRun !== undefined,
    onNote: (line) => out(`             ${line}`),
    inspect: dryRun !== undefined ? statePrinter(out) : undefined,
    inspectUrl: values.inspect as string | undefined,
    logFormat: values['log-format'] as 'json' | 'text' | undefined,
    steps,
    handleSignals: true,
  });
  if (dryRun !== undefined) {
    out(`\nresult: ${result.result}${result.reason ? ` (${result.reason})` : ''}, exit code ${result.exitCode}`);
    out('\ncommands the real backend would run:');
    for (const command of result.commands) out(`  ${shellCommand(command)}`);
    out(`\nfiles written under ${root}:`);
    for (const line of listFiles(root!)) out(`  ${line}`);
  }
  return result.exitCode;
}
