/**
 * The fleet view as one self-contained HTML page: the same tables as the text view, with inline SVG charts (the
 * outcomes as one stacked bar, time to READY=1 and to Ready accepted as histograms with their percentiles marked,
 * each step's share of the fleet's time as a bar). No script and no network: a CSP that admits only inline
 * styles; every string from a journal or a path is escaped.
 */
import { formatDuration } from './dot.js';
import type { Distribution, FleetRun, FleetSummary } from './fleet-stats.js';

const CSS = `
:root { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; background: #fff; }
body { margin: 0; } main { padding: 12px 20px 48px; max-width: 1200px; }
h1 { font-size: 18px; margin: 0 0 6px; } h2 { font-size: 16px; margin: 24px 0 8px; }
#summary { display: block; padding: 6px 12px; border-radius: 6px; font-weight: 600; margin: 0 0 6px; }
#summary.ok { background: #dafbe1; color: #116329; border: 1px solid #4ac26b; }
#summary.failed { background: #ffebe9; color: #a40e26; border: 1px solid #ff8182; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #d1d9e0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.cause { padding-left: 24px; color: #59636e; } code { font: 12px ui-monospace, monospace; overflow-wrap: anywhere; }
svg { display: block; max-width: 100%; height: auto; } svg text { font: 11px system-ui, sans-serif; fill: #59636e; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 13px; margin: 4px 0; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
`;

/** Escapes text for HTML element content and double-quoted attributes (trace.ts's rule, without its chart imports). */
const e = (text: string): string => String(text).replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

const PALETTE = ['#2da44e', '#cf222e', '#bf8700', '#8250df', '#0969da', '#57606a', '#e16f24', '#1b7c83'];
const ms = (value: number): string => (Number.isFinite(value) ? formatDuration(value) : '-');
const pct = (count: number, total: number): string => (total ? `${((100 * count) / total).toFixed(1)}%` : '-');

/** The outcomes as one stacked bar, `provisioned` green and every other in its own colour, with a legend. */
function outcomeBar(summary: FleetSummary): string {
  const width = 1000;
  let x = 0;
  const colour = (key: string, i: number): string => (key === 'provisioned' ? PALETTE[0]! : PALETTE[1 + (i % (PALETTE.length - 1))]!);
  const parts = summary.outcomes.map((o, i) => {
    const w = summary.runs ? (width * o.count) / summary.runs : 0;
    const rect = `<rect x="${x.toFixed(1)}" y="0" width="${w.toFixed(1)}" height="22" fill="${colour(o.key, i)}"><title>${e(o.key)}: ${o.count}</title></rect>`;
    x += w;
    return rect;
  });
  const legend = summary.outcomes.map((o, i) => `<span><span class="swatch" style="background:${colour(o.key, i)}"></span>${e(o.key)} <b>${o.count}</b> (${pct(o.count, summary.runs)})</span>`);
  return `<svg id="outcome-bar" viewBox="0 0 ${width} 22" role="img" aria-label="outcomes">${parts.join('')}</svg><p class="legend">${legend.join('')}</p>`;
}

/** A histogram of `values` in 40 bins up to their maximum, with p50, p90 and p99 marked (labels on rows of their own). */
export function histogram(id: string, values: readonly number[], d: Distribution): string {
  const [width, height, bins, labels] = [1000, 150, 40, 38];
  if (values.length === 0) return `<p id="${id}">no runs got there</p>`;
  const top = Math.max(d.max, 1);
  const counts = new Array<number>(bins).fill(0);
  for (const value of values) counts[Math.min(bins - 1, Math.floor((value / top) * bins))]!++;
  const most = Math.max(...counts);
  const barWidth = width / bins;
  const bars = counts.map((count, i) => {
    const h = (count / most) * (height - 14 - labels);
    return `<rect x="${(i * barWidth + 1).toFixed(1)}" y="${(height - 14 - h).toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="#0969da"><title>${ms((i * top) / bins)}–${ms(((i + 1) * top) / bins)}: ${count}</title></rect>`;
  });
  const marks = (['p50', 'p90', 'p99'] as const).map((name, row) => {
    const x = Math.min(width - 1, (d[name] / top) * width);
    const y = 10 + row * 12;
    return `<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${y + 2}" y2="${height - 14}" stroke="#cf222e" stroke-dasharray="3 2"/><text x="${x.toFixed(1)}" y="${y}" text-anchor="${x > width - 100 ? 'end' : 'start'}">${name} ${ms(d[name])}</text>`;
  });
  const axis = `<text x="0" y="${height - 2}">0</text><text x="${width}" y="${height - 2}" text-anchor="end">${ms(top)}</text>`;
  return `<svg id="${id}" viewBox="0 0 ${width} ${height}" role="img" aria-label="histogram">${bars.join('')}${marks.join('')}${axis}</svg>`;
}

function reasonRows(summary: FleetSummary): string {
  if (summary.reasons.length === 0) return '<tr><td colspan="3">none</td></tr>';
  return summary.reasons
    .map((reason) => {
      const causes = reason.causes.map((cause) => `<tr><td class="cause">${e(cause.key)}</td><td class="num">${cause.count}</td><td></td></tr>`);
      return [`<tr data-reason="${e(reason.key)}"><td><b>${e(reason.key)}</b></td><td class="num">${reason.count}</td><td class="num">${pct(reason.count, summary.runs)}</td></tr>`, ...causes].join('\n');
    })
    .join('\n');
}

const distributionCells = (d: Distribution): string => [String(d.n), ms(d.p50), ms(d.p90), ms(d.p99), ms(d.max)].map((cell) => `<td class="num">${e(cell)}</td>`).join('');

function stepRows(summary: FleetSummary): string {
  const most = summary.states[0]?.totalMs || 1;
  return summary.states
    .map((state) => {
      const bar = `<svg viewBox="0 0 200 10" width="200" height="10"><rect width="${((200 * state.totalMs) / most).toFixed(1)}" height="10" fill="#bf8700"/></svg>`;
      return `<tr data-state="${e(state.state)}"><td><code>${e(state.state)}</code></td>${distributionCells(state)}<td class="num">${e(ms(state.totalMs))}</td><td class="num">${state.slowestIn}</td><td>${bar}</td></tr>`;
    })
    .join('\n');
}

function namedList(id: string, title: string, entries: Array<{ source: string; why?: string }>): string {
  if (entries.length === 0) return '';
  const items = entries.map((entry) => `<li><code>${e(entry.source)}</code>${entry.why ? `: ${e(entry.why)}` : ''}</li>`).join('\n');
  return `<h2>${e(title)} (${entries.length})</h2>\n<ul id="${id}">\n${items}\n</ul>`;
}

/** The whole page; `runs` are the runs the summary was made of (for the histograms). */
export function fleetHtml(summary: FleetSummary, runs: readonly FleetRun[], title = 'fleet'): string {
  const failed = summary.runs - summary.ok;
  const headline = `${summary.runs} runs: ${summary.ok} ok, ${failed} not (${pct(failed, summary.runs)})${summary.unreadable.length ? `; ${summary.unreadable.length} journals unreadable` : ''}`;
  const { ready, accepted, total } = summary.times;
  const pick = (key: 'readyMs' | 'acceptedMs'): number[] => runs.flatMap((run) => (run[key] === undefined ? [] : [run[key]]));
  const top = summary.states[0];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(`${title}: ${summary.runs} runs`)}</title>
<style>${CSS}</style>
</head>
<body>
<main>
<p id="summary" class="${failed || summary.unreadable.length ? 'failed' : 'ok'}">${e(headline)}</p>
<h1>provisioning runs · <code>${e(title)}</code></h1>
<h2>Outcomes</h2>
${outcomeBar(summary)}
<h2>Failure reasons</h2>
<table id="reasons"><thead><tr><th>reason, then the cause in words</th><th>runs</th><th>share</th></tr></thead><tbody>
${reasonRows(summary)}
</tbody></table>
<h2>Time from the run's start</h2>
<table id="times"><thead><tr><th></th><th>runs</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr></thead><tbody>
<tr data-time="ready"><td>READY=1 (logins may start)</td>${distributionCells(ready)}</tr>
<tr data-time="accepted"><td>Ready accepted by the fabric</td>${distributionCells(accepted)}</tr>
<tr data-time="total"><td>whole run</td>${distributionCells(total)}</tr>
</tbody></table>
<h2>Time to READY=1</h2>
${histogram('ready-histogram', pick('readyMs'), ready)}
<h2>Time to Ready accepted</h2>
${histogram('accepted-histogram', pick('acceptedMs'), accepted)}
<h2>Steps by total time${top ? `: <code>${e(top.state)}</code> dominates` : ''}</h2>
<table id="steps"><thead><tr><th>step</th><th>runs</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>total</th><th>slowest in</th><th>share</th></tr></thead><tbody>
${stepRows(summary)}
</tbody></table>
${namedList('unreadable', 'Unreadable journals (not counted)', summary.unreadable)}
${namedList('truncated', 'Truncated journals (a torn last line dropped; counted)', summary.truncated.map((source) => ({ source })))}
${namedList('skipped', 'Skipped (not provisioning journals)', summary.skipped)}
</main>
</body>
</html>
`;
}
