/**
 * One self-contained HTML page for one run: the chart as inline SVG with the run's path filled, coloured and
 * numbered, an ok/failed badge, time per state and the journal as a table. No network: a strict CSP, inline
 * CSS and a few lines of inline JS; every string from the machine or the journal is escaped.
 */
import type { AnyStateMachine } from 'xstate';
import { decodeDomId } from './dom-id.js';
import { formatDuration, formatSteps, toDot } from './dot.js';
import { buildGraph, type GraphOptions } from './graph.js';
import type { JournalLine } from './journal.js';
import { analyseRun, highlightOf, type RunPath } from './run-path.js';
import { renderSvg } from './svg.js';

/** Escapes text for HTML element content and double-quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

const CSS = `
:root { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; background: #fff; }
body { margin: 0 auto; padding: 16px 24px 48px; max-width: 1400px; }
h1 { font-size: 20px; margin: 0 8px 0 0; display: inline-block; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.badge { display: inline-block; padding: 3px 10px; border-radius: 12px; font-weight: 600; vertical-align: 3px; }
.badge.ok { background: #dafbe1; color: #116329; border: 1px solid #4ac26b; }
.badge.failed { background: #ffebe9; color: #a40e26; border: 1px solid #ff8182; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 12px 0; }
dt { color: #59636e; } dd { margin: 0; font-family: ui-monospace, monospace; }
#chart { overflow: auto; border: 1px solid #d1d9e0; border-radius: 6px; padding: 8px; background: #fcfcfd; }
#chart svg { max-width: none; height: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #d1d9e0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, monospace; word-break: break-word; }
#journal tr:hover, #journal tr.focus { background: #fff8c5; }
g.focus > path, g.focus > polygon, g.focus > ellipse { stroke: #bf8700 !important; stroke-width: 4px; }
`;

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

/** Adds `data-*` hooks to the Graphviz `<g>` of every state and edge, decoding the ids `toDot` gave them. */
function tagSvg(svg: string, run: RunPath): string {
  const body = svg.slice(svg.indexOf('<svg'));
  return body.replace(/<g id="((?:state|edge)_[A-Za-z0-9._]*)" class="(node|cluster|edge)"/g, (whole, id: string, cls: string) => {
    const decoded = decodeDomId(id);
    if (!decoded) return whole;
    if (decoded.kind === 'state') {
      const steps = run.visited.get(decoded.value) ?? [];
      const end = run.last === decoded.value ? ` data-end="${run.outcome}"` : '';
      return `<g id="${id}" class="${cls}" data-state="${escapeHtml(decoded.value)}" data-visited="${steps.length > 0}" data-step="${steps.join(' ')}"${end}`;
    }
    const key = decoded.value.replace(/#\d+$/, '');
    const steps = run.edges.get(key) ?? [];
    return `<g id="${id}" class="${cls}" data-edge="${escapeHtml(key)}" data-taken="${steps.length > 0}" data-step="${steps.join(' ')}"`;
  });
}

/** Renders a state value compactly: `work.metadata.backoff, work.report.sent`. */
function valueText(value: unknown, prefix = ''): string {
  if (typeof value === 'string') return prefix + value;
  if (!value || typeof value !== 'object') return prefix || '';
  const parts = Object.entries(value).map(([key, child]) => valueText(child, `${prefix}${key}.`));
  return parts.join(', ');
}

/** The outcome badge text, e.g. `FAILED: failed to retrieve instance metadata (exit 1)`. */
function badgeText(run: RunPath, last: JournalLine | undefined): string {
  if (!run.complete) return `FAILED: run ended before a final state (${last ? `last status ${last.status}` : 'empty journal'})`;
  const output = last?.output;
  const detail = [output?.result, output?.reason, output?.exitCode !== undefined ? `exit ${output.exitCode}` : undefined]
    .filter((part) => part !== undefined)
    .join(' · ');
  return `${run.outcome === 'ok' ? 'OK' : 'FAILED'}${detail ? `: ${detail}` : ''}`;
}

export interface TraceInput extends GraphOptions {
  machine: AnyStateMachine;
  journalLines: JournalLine[];
  /** Shown in the header, e.g. the journal's path. */
  title?: string;
}

/** Renders one run as a single self-contained HTML page. */
export async function renderTraceHtml({ machine, journalLines, title, ...graphOptions }: TraceInput): Promise<string> {
  const graph = buildGraph(machine, graphOptions);
  const run = analyseRun(graph, journalLines);
  const svg = tagSvg(await renderSvg(toDot(graph, { highlight: highlightOf(run) })), run);
  const first = journalLines[0];
  const last = journalLines[journalLines.length - 1];
  const total = first && last ? Date.parse(last.t) - Date.parse(first.t) : 0;
  const e = escapeHtml;
  const timingRows = run.timings
    .map((timing) => `<tr data-state="${e(timing.state)}"><td><code>${e(timing.state)}</code></td><td class="num">${timing.visits}</td><td class="num">${e(formatDuration(timing.ms))}</td><td>${e(formatSteps(timing.steps))}</td></tr>`)
    .join('\n');
  const journalRows = journalLines
    .map((line) => {
      const offset = first ? Date.parse(line.t) - Date.parse(first.t) : 0;
      const transitions = line.transitions.map((key) => `<code>${e(key)}</code>`).join('<br>');
      return `<tr data-seq="${line.seq}"><td class="num">${line.seq}</td><td><code>${e(line.t)}</code></td><td class="num">+${e(formatDuration(offset))}</td><td><code>${e(line.event)}</code></td><td><code>${e(valueText(line.value))}</code></td><td>${e(line.tags.join(', '))}</td><td>${transitions}</td><td>${e(line.status)}</td></tr>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(`${graph.id} run: ${run.outcome}`)}</title>
<style>${CSS}</style>
</head>
<body data-outcome="${run.outcome}">
<header>
<h1>${e(graph.id)} run</h1>
<span id="outcome" class="badge ${run.outcome}" data-outcome="${run.outcome}" data-complete="${run.complete}">${e(badgeText(run, last))}</span>
<dl>
${title ? `<dt>journal</dt><dd>${e(title)}</dd>` : ''}
<dt>started</dt><dd>${e(run.startedAt ?? '-')}</dd>
<dt>ended</dt><dd>${e(run.endedAt ?? '-')} (${e(formatDuration(total))})</dd>
<dt>steps</dt><dd>${journalLines.length}</dd>
<dt>final state</dt><dd id="final-state" data-state="${e(run.last ?? '')}">${e(run.last ?? '-')}</dd>
</dl>
</header>
<section id="chart" aria-label="statechart with the run's path">${svg}</section>
<h2>Time per state</h2>
<table id="durations"><thead><tr><th>state</th><th>visits</th><th>time</th><th>steps</th></tr></thead><tbody>
${timingRows}
</tbody></table>
<h2>Journal</h2>
<table id="journal"><thead><tr><th>#</th><th>time</th><th>offset</th><th>event</th><th>state</th><th>tags</th><th>transitions</th><th>status</th></tr></thead><tbody>
${journalRows}
</tbody></table>
<script>${SCRIPT}</script>
</body>
</html>
`;
}
