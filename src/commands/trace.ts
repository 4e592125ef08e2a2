/**
 * `bootstate trace [JOURNAL]`: prints how a run ended and why, and writes one self-contained HTML page of it (the
 * chart with its path, a timeline, timings and the journal in words).
 */
import { setFlagsFromString } from 'node:v8';
import type { ParsedArgs } from '../cli/argv.js';
import { configFrom } from '../cli/options.js';
import { EXIT_OK } from '../core/errors.js';

export async function trace(values: ParsedArgs['values'], positionals: string[]): Promise<number> {
  // The loader turns V8's JITs off for the agent's short runs (scripts/loader.cjs); a trace is an offline pass over
  // a journal of any length, where they nearly halve the time (42 MB: 16.4 s interpreted, 9.4 s with them). The code
  // caches were checked when their scripts loaded, before this: a trace leaves dist/*.cache as they were.
  setFlagsFromString('--opt --sparkplug');
  const { writeTrace } = await import('../inspect/render.js');
  const config = await configFrom(values.config as string | undefined);
  const written = await writeTrace({ journal: positionals[0], dataDir: config.data_dir.path, output: values.output as string | undefined });
  process.stdout.write(`${written.summary}\ntrace: ${written.path}\n`);
  return EXIT_OK;
}
