/** `bootstate graph`: draws a statechart as DOT, Mermaid, SVG or an HTML page. */
import { writeFileSync } from 'node:fs';
import type { ParsedArgs } from '../cli/argv.js';
import { EXIT_OK } from '../core/errors.js';

export async function graph(values: ParsedArgs['values']): Promise<number> {
  const { renderMachine } = await import('../inspect/render.js');
  const text = await renderMachine(values.machine as string, values.format as string, { overview: values.overview === true });
  if (values.output) writeFileSync(values.output as string, text);
  else process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  return EXIT_OK;
}
