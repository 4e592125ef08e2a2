/**
 * Renders a bootstate statechart to a file, e.g. the README's picture:
 *   npx tsx scripts/render-chart.ts --machine provisioning --format svg --out docs/provisioning.svg
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CHART_FORMATS, renderMachine } from '../src/inspect/render.js';

const { values } = parseArgs({
  options: {
    machine: { type: 'string', default: 'provisioning' },
    format: { type: 'string', default: 'svg' },
    out: { type: 'string' },
    overview: { type: 'boolean', default: false },
  },
});
if (!(CHART_FORMATS as readonly string[]).includes(values.format!)) {
  console.error(`--format must be one of ${CHART_FORMATS.join(', ')}`);
  process.exit(2);
}
const text = await renderMachine(values.machine!, values.format!, { overview: values.overview });
if (values.out) {
  fs.mkdirSync(path.dirname(path.resolve(values.out)), { recursive: true });
  fs.writeFileSync(values.out, text);
  console.error(`wrote ${values.out}`);
} else process.stdout.write(text);
