/**
 * `bootstate fleet PATH…`: many runs' journals or OTLP/JSON trace exports (files, directories, quoted globs) read as one fleet and printed as
 * the distribution an operator needs, as text (or JSON), and with --output as one self-contained HTML page.
 */
import { writeFileSync } from 'node:fs';
import type { ParsedArgs } from '../cli/argv.js';
import { bundled } from '../core/bundled-asset.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';

export async function fleet(values: ParsedArgs['values'], positionals: string[]): Promise<number> {
  // A long run over many journals, as `trace` is: the loader gives back the JITs it turns off for the agent's short
  // ones (scripts/build/loader.cjs). A name only the loader answers, loaded synchronously: ESM has no such form.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (bundled) require('bootstate-v8:long-run');
  const { readFleet } = await import('../inspect/fleet-read.js');
  const { summary, runs } = await readFleet(positionals);
  if (values.output) {
    const { fleetHtml } = await import('../inspect/fleet-html.js');
    writeFileSync(values.output as string, fleetHtml(summary, runs, positionals.join(' ')), { mode: 0o600 });
  }
  if (values.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else {
    const { fleetText } = await import('../inspect/fleet-text.js');
    process.stdout.write(fleetText(summary));
  }
  if (values.output) process.stderr.write(`fleet: ${values.output as string}\n`);
  return summary.runs > 0 ? EXIT_OK : EXIT_FAILURE;
}
