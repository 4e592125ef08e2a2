/**
 * `bootstate graph` and `bootstate trace`: the agent's own charts rendered offline, and a run's journal drawn
 * onto its chart as one self-contained HTML page.
 */
import { writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { AnyStateMachine } from 'xstate';
import { DEFAULT_CONFIG } from '../config/defaults.js';
import { withEmbeddedFont } from './chart-font.js';
import { renderChartHtml } from './chart-html.js';
import { buildGraph, renderSvg, toDot, toMermaid, type GraphOptions } from './graph.js';
import { latestJournal, readJournal } from './journal.js';
import { overviewOf } from './overview.js';
import { analyseRun } from './run-path.js';
import { normalizeLines } from './journal-input.js';
import { renderTraceHtml, traceSummary } from './trace.js';

export const CHART_FORMATS = ['svg', 'mermaid', 'dot', 'html'] as const;
export type ChartFormat = (typeof CHART_FORMATS)[number];

/** One of the agent's machines by name, with the context its delays take under the default config. */
export async function loadMachine(name: string): Promise<{ machine: AnyStateMachine; options: GraphOptions }> {
  if (name === 'provisioning') {
    const { provisioningMachine } = await import('../../machines/provisioning-machine.js');
    return { machine: provisioningMachine, options: { delayContext: { config: DEFAULT_CONFIG, terminating: false } } };
  }
  if (name === 'monitor') {
    const { monitorMachine, monitorInput } = await import('../../machines/monitor.js');
    return { machine: monitorMachine, options: { delayContext: monitorInput(DEFAULT_CONFIG.monitor, false) } };
  }
  throw new Error(`unknown machine "${name}" (provisioning | monitor)`);
}

/**
 * Renders machine `name` as DOT, Mermaid, SVG or a self-contained HTML page; `overview` draws retry loops and
 * simple regions as single states (the README's picture); the HTML page always holds both.
 */
export async function renderMachine(name: string, format: string, view: { overview?: boolean } = {}): Promise<string> {
  if (!CHART_FORMATS.includes(format as ChartFormat)) throw new Error(`--format must be one of ${CHART_FORMATS.join(', ')}`);
  const { machine, options } = await loadMachine(name);
  const full = buildGraph(machine, options);
  const graph = view.overview ? overviewOf(full).graph : full;
  const dotOptions = { compact: view.overview === true };
  if (format === 'dot') return toDot(graph, dotOptions);
  if (format === 'mermaid') return toMermaid(graph);
  if (format === 'html') return renderChartHtml(machine, options);
  const svg = withEmbeddedFont(await renderSvg(toDot(graph, dotOptions)));
  return svg.endsWith('\n') ? svg : `${svg}\n`;
}

/**
 * Writes the trace page of `journal` (default: the latest journal under `dataDir`) to `output` (default: the
 * journal's path with `.html`); returns the page's path and the run's story in one line (its outcome and cause).
 */
export async function writeTrace(options: { journal?: string; dataDir: string; output?: string }): Promise<{ path: string; summary: string }> {
  const journal = options.journal ?? latestJournal(options.dataDir);
  if (!journal) throw new Error(`no journal found under ${options.dataDir}/runs`);
  const lines = readJournal(journal);
  const machineName = lines.find((line) => line.machine)?.machine ?? 'provisioning';
  const { machine, options: graphOptions } = await loadMachine(machineName);
  const html = await renderTraceHtml({ machine, journalLines: lines, title: basename(journal), ...graphOptions });
  const output = options.output ?? join(dirname(journal), `${basename(journal, '.jsonl')}.html`);
  writeFileSync(output, html, { mode: 0o600 });
  const summary = traceSummary(analyseRun(buildGraph(machine, graphOptions), normalizeLines(lines)), normalizeLines(lines));
  return { path: output, summary };
}
