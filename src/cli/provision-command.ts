/** `bootstate provision`: maps the parsed options onto `runProvision` and its output onto the exit code. */
import type { ParsedArgs } from './argv.js';

/** `--groups a,b --groups c` and `BOOTSTATE_USER_GROUPS=a,b` (the flag wins) → `['a','b','c']`. */
export function parseGroups(flags: string[] | undefined, env: string | undefined): string[] {
  const raw = flags && flags.length > 0 ? flags : env ? [env] : [];
  return raw.flatMap((g) => g.split(',')).map((g) => g.trim()).filter(Boolean);
}

export async function provisionCommand(values: ParsedArgs['values']): Promise<number> {
  const { runProvision } = await import('../provision.js');
  const result = await runProvision({
    configPath: values.config as string | undefined,
    groups: parseGroups(values.groups as string[] | undefined, process.env.BOOTSTATE_USER_GROUPS),
    dryRunDir: values['dry-run'] as string | undefined,
    inspectUrl: values.inspect as string | undefined,
    handleSignals: true,
  });
  return result.exitCode;
}
