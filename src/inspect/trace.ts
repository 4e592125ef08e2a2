/**
 * One self-contained HTML page for one run, telling its story: the outcome and its cause in the first line, the
 * chart with the run's path (overview first, every state one click away; fitted, zoomable, pannable), a timeline
 * of the parallel work, time per state, and the journal in plain words. No network: a CSP that admits only the
 * page's own scripts by hash; every string from the machine or the journal is escaped.
 */
import type { AnyStateMachine } from 'xstate';
import { tagSvg } from './chart-tags.js';
import { formatDuration, formatSteps, toDot, type DotHighlight } from './dot.js';
import { buildGraph, type GraphOptions, type MachineGraph } from './graph.js';
import { normalizeLine, TimerRecord } from './journal-input.js';
import type { JournalLine } from './journal.js';
import { overviewOf } from './overview.js';
import { CHART_HELP, CHART_VIEW_CSS, CHART_VIEW_JS, chartTools, inlineSvg, scriptHash } from './pan-zoom.js';
import { highlightOf, RunAnalysis, type RunPath } from './run-path.js';
import { renderSvg } from './svg.js';
import { TIMELINE_CSS, TimelineBuilder, timelineRowsHtml } from './timeline.js';
import { eventWords, leafNames, stateName } from './words.js';

/** Escapes text for HTML element content and double-quoted attributes. */
export function escapeHtml(text: string): string {
  return String(text).replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

const CSS = `
:root { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; background: #fff; }
body { margin: 0; }
main { padding: 0 20px 48px; }
h1 { font-size: 18px; margin: 0 0 6px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
#outcome { display: block; padding: 6px 12px; border-radius: 6px; font-weight: 600; margin: 0 0 6px; overflow-wrap: anywhere; }
#outcome.ok { background: #dafbe1; color: #116329; border: 1px solid #4ac26b; }
#outcome.failed { background: #ffebe9; color: #a40e26; border: 1px solid #ff8182; }
.facts { display: flex; flex-wrap: wrap; gap: 2px 18px; margin: 0; color: #59636e; font-size: 13px; }
.facts b { color: #1f2328; font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: 13px; table-layout: auto; }
th, td { border-bottom: 1px solid #d1d9e0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.time { white-space: nowrap; font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, monospace; overflow-wrap: anywhere; }
#journal tr:hover, #journal tr.focus { background: #fff8c5; }
g.focus > path, g.focus > polygon, g.focus > ellipse { stroke: #bf8700 !important; stroke-width: 4px; }
${CHART_VIEW_CSS}${TIMELINE_CSS}`;

const SCRIPT = `
document.querySelectorAll('#journal tbody tr').forEach(function (row) {
  function set(on) {
    row.classList.toggle('focus', on);
    document.querySelectorAll('[data-step~="' + row.dataset.seq + '"]').forEach(function (el) {
      if (el.tagName.toLowerCase() === 'g') el.classList.toggle('focus', on);
    });
  }
  row.addEventListener('mouseenter', function () { set(true); });
  row.addEventListener('mouseleave', function () { set(false); });
});
`;

/** Whether `steps` is strictly increasing (a set, sorted). */
function isSortedSet(steps: number[]): boolean {
  for (let i = 1; i < steps.length; i++) if (!(steps[i - 1]! < steps[i]!)) return false;
  return true;
}

/** The highlight of a run on the overview: each state's steps and time gathered on the node that shows it. */
function overviewHighlight(full: MachineGraph, alias: Map<string, string>, hl: DotHighlight): DotHighlight {
  const gathered = new Map<string, number[][]>();
  for (const [state, steps] of hl.visited) {
    const shown = alias.get(state) ?? state;
    gathered.set(shown, [...(gathered.get(shown) ?? []), steps]);
  }
  // Each shown node's steps: the union of its members', sorted once (not once per member: a long run has many).
  const visited = new Map<string, number[]>();
  for (const [shown, lists] of gathered) visited.set(shown, lists.length === 1 && isSortedSet(lists[0]!) ? lists[0]! : [...new Set(lists.flat())].sort((a, b) => a - b));
  const durations = new Map<string, number>();
  for (const shown of visited.keys()) {
    const own = full.nodes.get(shown)?.children.length ? hl.durations?.get(shown) : undefined;
    const members = [...alias].filter(([, to]) => to === shown).map(([from]) => hl.durations?.get(from) ?? 0);
    durations.set(shown, own ?? members.reduce((sum, ms) => sum + ms, 0));
  }
  const final = hl.final ? { id: alias.get(hl.final.id) ?? hl.final.id, outcome: hl.final.outcome } : undefined;
  return { visited, edges: hl.edges, durations, ...(final ? { final } : {}) };
}

/** The first line of a run's story: how it ended, after how long, and why. */
export function traceSummary(run: RunPath, lines: JournalLine[]): string {
  return summaryOf(run, lines[0], lines[lines.length - 1]);
}

/** The same, from the run's first and last journal lines. */
function summaryOf(run: RunPath, first: JournalLine | undefined, last: JournalLine | undefined): string {
  const took = first && last ? formatDuration(Math.max(0, Date.parse(last.t) - Date.parse(first.t))) : '0ms';
  if (!run.complete) return `FAILED: the run ended before a final state after ${took} (${last ? `last status ${last.status}` : 'empty journal'})`;
  const output = last?.output;
  const exit = output?.exitCode !== undefined ? `exit ${output.exitCode}` : undefined;
  if (run.outcome === 'ok') return `OK: ${[output?.result ?? 'done', `in ${took}`, exit].filter(Boolean).join(', ')}`;
  const why = output?.cause ?? output?.reason ?? output?.result ?? 'failed';
  const detail = [output?.cause ? output.reason : undefined, exit].filter(Boolean).join(', ');
  return `FAILED after ${took}: ${why}${detail ? ` (${detail})` : ''}`;
}

export interface TraceInput extends GraphOptions {
  machine: AnyStateMachine;
  journalLines: unknown[];
  /** Shown in the header, e.g. the journal's path. */
  title?: string;
}

/** A clock time with milliseconds from an ISO timestamp (`12:30:05.123`), or the text as it is. */
const clock = (t: string): string => /T(\d\d:\d\d:\d\d(?:\.\d+)?)/.exec(t)?.[1] ?? t;

/** Renders one run as a single self-contained HTML page. */
export async function renderTraceHtml({ journalLines, ...input }: TraceInput): Promise<string> {
  const parts: string[] = [];
  await writeTraceHtml({ ...input, journal: () => journalLines }, (chunk) => void parts.push(chunk));
  return parts.join('');
}

export interface TraceSource extends GraphOptions {
  machine: AnyStateMachine;
  /**
   * The journal's parsed lines in order, read twice: once to analyse the run, once to write the journal's rows.
   * A file is streamed each time, so the page of a journal of any size is written without holding its lines.
   */
  journal: () => AsyncIterable<unknown> | Iterable<unknown>;
  /** Shown in the header, e.g. the journal's path. */
  title?: string;
}

/** What the first read of a journal tells: the run, the chart labelled with its timers, its timeline, its ends. */
interface RunRead {
  graph: MachineGraph;
  timers: Record<string, number> | undefined;
  run: RunPath;
  first: JournalLine | undefined;
  last: JournalLine | undefined;
  /** How many lines the first read saw; the second read writes as many. */
  count: number;
  timeline: TimelineBuilder;
}

/** The first read: each line analysed, timed and added to the timeline as it comes, none of them kept. */
async function readRun({ machine, journal, title: _title, ...graphOptions }: TraceSource): Promise<RunRead> {
  // The graph's structure does not depend on the timers (they only label delays), so the run is analysed on
  // the plain graph while its timers are being read, and drawn on the one labelled with them.
  const plain = buildGraph(machine, graphOptions);
  const analysis = new RunAnalysis(plain);
  const timeline = new TimelineBuilder(plain);
  const timerRecord = new TimerRecord();
  let index = 0;
  for await (const raw of journal()) {
    const line = normalizeLine(raw, index++);
    timerRecord.add(line);
    analysis.add(line);
    timeline.add(line);
  }
  const timers = timerRecord.timers;
  const graph = timers ? buildGraph(machine, { ...graphOptions, timers }) : plain;
  const first = analysis.first;
  const last = analysis.last;
  return { graph, timers, run: analysis.finish(), first, last, count: index, timeline };
}

/** The run's path drawn on the overview and on the full chart, as inline SVG. */
async function runCharts(graph: MachineGraph, run: RunPath): Promise<{ overviewSvg: string; fullSvg: string }> {
  const hl = highlightOf(run);
  const { graph: overview, alias } = overviewOf(graph);
  const overviewHl = overviewHighlight(graph, alias, hl);
  const fullSvg = tagSvg(inlineSvg(await renderSvg(toDot(graph, { highlight: hl })), 'full', true), graph, { highlight: hl, outcome: run.outcome });
  const overviewDot = toDot(overview, { highlight: overviewHl, compact: true });
  const overviewSvg = tagSvg(inlineSvg(await renderSvg(overviewDot), 'overview'), overview, { highlight: overviewHl, outcome: run.outcome, alias });
  return { overviewSvg, fullSvg };
}

/** One journal line as a row of the page's journal table. */
function journalRow({ graph, timers, first }: RunRead, line: JournalLine): string {
  const e = escapeHtml;
  const offset = first ? Date.parse(line.t) - Date.parse(first.t) : 0;
  const moves = line.transitions.map((key) => `<code>${e(transitionWords(graph, key))}</code>`).join('<br>');
  const states = leafNames(line.value).map((leaf) => `<code>${e(leaf)}</code>`).join('<br>');
  return `<tr data-seq="${e(String(line.seq))}"><td class="num">${e(String(line.seq))}</td><td class="time" title="${e(line.t)}">${e(clock(line.t))}</td><td class="num">+${e(formatDuration(offset))}</td><td>${e(eventWords(line.event, timers))}</td><td>${states}</td><td>${e(line.tags.join(', '))}</td><td>${moves}</td><td>${e(line.status)}</td></tr>`;
}

/** The page up to the journal's rows, which are streamed between it and PAGE_TAIL. */
function pageHead(read: RunRead, charts: { overviewSvg: string; fullSvg: string }, summary: string, title: string | undefined): string {
  const { graph, timers, run, count, timeline } = read;
  const e = escapeHtml;
  const name = (id: string): string => stateName(graph.root, id);
  const timingRows = run.timings
    .map((timing) => `<tr data-state="${e(name(timing.state))}"><td><code>${e(name(timing.state))}</code></td><td class="num">${timing.visits}</td><td class="num">${e(formatDuration(timing.ms))}</td><td>${e(formatSteps(timing.steps))}</td></tr>`)
    .join('\n');
  const timerFacts = timers ? Object.entries(timers).map(([key, ms]) => `${key} ${formatDuration(ms)}`).join(', ') : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; font-src data:; script-src ${scriptHash(CHART_VIEW_JS)} ${scriptHash(SCRIPT)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(`${graph.id} run: ${run.outcome}`)}</title>
<style>${CSS}</style>
</head>
<body data-outcome="${e(run.outcome)}">
<div class="screen">
<header>
<p id="outcome" class="${e(run.outcome)}" data-outcome="${e(run.outcome)}" data-complete="${run.complete}">${e(summary)}</p>
<h1>${e(graph.id)} run${title ? ` · <code>${e(title)}</code>` : ''}</h1>
<p class="facts"><span>started <b>${e(run.startedAt ?? '-')}</b></span><span>steps <b>${count}</b></span>
<span>final state <b id="final-state" data-state="${e(run.last ? name(run.last) : '')}">${e(run.last ? name(run.last) : '-')}</b></span>${timerFacts ? `<span>timers <b id="timers">${e(timerFacts)}</b></span>` : ''}</p>
${CHART_HELP}
</header>
<section id="chart" class="chart-view" tabindex="0" aria-label="statechart with the run's path">
${chartTools(true)}
${charts.overviewSvg}
${charts.fullSvg}
</section>
</div>
<main>
<h2>Timeline</h2>
${timelineRowsHtml(graph, timeline.finish(), e)}
<h2>Time per state</h2>
<table id="durations"><thead><tr><th>state</th><th>visits</th><th>time</th><th>steps</th></tr></thead><tbody>
${timingRows}
</tbody></table>
<h2>Journal</h2>
<table id="journal"><thead><tr><th>#</th><th>time</th><th>since start</th><th>what happened</th><th>states now</th><th>health</th><th>moves</th><th>status</th></tr></thead><tbody>
`;
}

const PAGE_TAIL = `</tbody></table>
</main>
<script>${CHART_VIEW_JS}</script>
<script>${SCRIPT}</script>
</body>
</html>
`;

/**
 * Writes the page of one run to `write`, piece by piece, and returns the run's path and its story in one line.
 * Memory stays bounded by what the page shows of the run (each state's steps, the timeline's segments), never
 * by the journal's lines, which are analysed and written one at a time.
 */
export async function writeTraceHtml(source: TraceSource, write: (chunk: string) => void): Promise<{ run: RunPath; summary: string }> {
  const read = await readRun(source);
  const { run, first, last, count } = read;
  const charts = await runCharts(read.graph, run);
  const summary = summaryOf(run, first, last);
  write(pageHead(read, charts, summary, source.title));
  // The second read: each line written as its row, as far as the first read went (a journal still being appended
  // to keeps the page consistent with its analysis).
  let index = 0;
  for await (const raw of source.journal()) {
    if (index >= count) break;
    write(`${journalRow(read, normalizeLine(raw, index++))}\n`);
  }
  if (count === 0) write('\n');
  write(PAGE_TAIL);
  return { run, summary };
}

/** A transition key in words: `requesting → backoff (guard canRetry)`, with state names below the machine. */
function transitionWords(graph: MachineGraph, key: string): string {
  const match = /^(.*) -> (.*) on (.*?)(?: \[(.*)\])?$/.exec(key);
  if (!match) return key;
  const short = (id: string): string => graph.nodes.get(id)?.key ?? id;
  const targets = match[2] === '(internal)' ? 'stays' : match[2]!.split(', ').map(short).join(', ');
  return `${short(match[1]!)} → ${targets}${match[4] ? ` [${match[4]}]` : ''}`;
}
