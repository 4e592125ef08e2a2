/**
 * Renders a bootstate statechart to a file, e.g. the README's picture:
 *   npx tsx scripts/render-chart.ts --machine provisioning --format svg --out docs/provisioning.svg
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { AnyStateMachine } from 'xstate';
import { renderChartHtml } from '../src/inspect/chart-html.js';
import { buildGraph, renderSvg, toDot, toMermaid, type GraphOptions } from '../src/inspect/graph.js';

const FORMATS = ['svg', 'mermaid', 'dot', 'html'] as const;
type Format = (typeof FORMATS)[number];

/** Loads one of the agent's machines by name, with the context its delays take under the default config. */
async function loadMachine(name: string): Promise<{ machine: AnyStateMachine; options: GraphOptions }> {
  const { DEFAULT_CONFIG } = await import('../src/config/defaults.js');
  if (name === 'provisioning') {
    const { provisioningMachine } = await import('../machines/provisioning.js');
    return { machine: provisioningMachine, options: { delayContext: { config: DEFAULT_CONFIG, terminating: false } } };
  }
  if (name === 'monitor') {
    const { monitorMachine, monitorInput } = await import('../machines/monitor.js');
    return { machine: monitorMachine, options: { delayContext: monitorInput(DEFAULT_CONFIG.monitor, false) } };
  }
  throw new Error(`unknown machine "${name}" (provisioning | monitor)`);
}

/** Renders a machine in one of the chart formats. */
async function renderChart({ machine, options }: { machine: AnyStateMachine; options: GraphOptions }, format: Format): Promise<string> {
  const graph = buildGraph(machine, options);
  if (format === 'dot') return toDot(graph);
  if (format === 'mermaid') return toMermaid(graph);
  if (format === 'html') return renderChartHtml(machine, options);
  const svg = await renderSvg(toDot(graph));
  return svg.endsWith('\n') ? svg : `${svg}\n`;
}

const { values } = parseArgs({
  options: {
    machine: { type: 'string', default: 'provisioning' },
    format: { type: 'string', default: 'svg' },
    out: { type: 'string' },
  },
});
if (!FORMATS.includes(values.format as Format)) {
  console.error(`--format must be one of ${FORMATS.join(', ')}`);
  process.exit(2);
}
const text = await renderChart(await loadMachine(values.machine!), values.format as Format);
if (values.out) {
  fs.mkdirSync(path.dirname(path.resolve(values.out)), { recursive: true });
  fs.writeFileSync(values.out, text);
  console.error(`wrote ${values.out}`);
} else process.stdout.write(text);
