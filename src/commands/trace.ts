/**
 * `bootstate trace [JOURNAL]`: prints how a run ended and why, and writes one self-contained HTML page of it (the
 * chart with its path, a timeline, timings and the journal in words).
 */
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import { bundled } from '../core/bundled-asset.js';
import { EXIT_OK } from '../core/errors.js';

export async function trace(values: ParsedArgs['values'], positionals: string[]): Promise<number> {
  // A long run: the loader gives it back the JITs it turns off for the agent's short ones (scripts/build/loader.cjs).
  // The code caches were checked when their scripts loaded, before this: a trace leaves dist/*.cache as they were.
  // A name only the loader answers, loaded synchronously: ESM has no such form.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (bundled) require('bootstate-v8:long-run');
  const { writeTrace } = await import('../inspect/render.js');
  const config = await configFrom(values.config as string | undefined);
  const written = await writeTrace({ journal: positionals[0], dataDir: config.data_dir.path, output: values.output as string | undefined });
  process.stdout.write(`${written.summary}\ntrace: ${written.path}\n`);
  return EXIT_OK;
}
