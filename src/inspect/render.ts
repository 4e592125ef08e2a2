/**
 * `bootstate graph` and `bootstate trace`: the agent's own charts rendered offline, and a run's journal drawn
 * onto its chart as one self-contained HTML page.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { AnyStateMachine } from 'xstate';
import { DEFAULT_CONFIG } from '../config/defaults.js';
import { withEmbeddedFont } from './chart-font.js';
import { renderChartHtml } from './chart-html.js';
import { toDot } from './dot.js';
import { buildGraph, type GraphOptions } from './graph.js';
import { toMermaid } from './mermaid.js';
import { renderSvg } from './svg.js';
import { latestJournal, streamJournal } from './journal.js';
import { overviewOf } from './overview.js';
import { writeTraceHtml } from './trace.js';

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
 * The journal is streamed (read twice, never held) and the page written as it is made, so a journal of any size
 * is traced in bounded memory. The output is opened once the journal has been read through: a journal that
 * cannot be read leaves no page.
 */
export async function writeTrace(options: { journal?: string; dataDir: string; output?: string }): Promise<{ path: string; summary: string }> {
  const journal = options.journal ?? latestJournal(options.dataDir);
  if (!journal) throw new Error(`no journal found under ${options.dataDir}/runs`);
  const machineName = await machineOf(journal);
  const { machine, options: graphOptions } = await loadMachine(machineName);
  const output = options.output ?? join(dirname(journal), `${basename(journal, '.jsonl')}.html`);
  let fd: number | null = null;
  let pending = '';
  const flush = () => {
    fd ??= openSync(output, 'w', 0o600);
    writeSync(fd, pending);
    pending = '';
  };
  try {
    const { summary } = await writeTraceHtml({ machine, journal: () => streamJournal(journal), title: basename(journal), ...graphOptions }, (chunk) => {
      pending += chunk;
      if (pending.length >= 1 << 20) flush();
    });
    flush();
    return { path: output, summary };
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** The machine a journal is of: the first line that names one (the first line, as the agent writes them). */
async function machineOf(journal: string): Promise<string> {
  for await (const line of streamJournal(journal)) if (line.machine) return line.machine;
  return 'provisioning';
}
