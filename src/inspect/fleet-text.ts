/**
 * The fleet view as plain text, what `bootstate fleet` prints: how many runs were read (and which could not be),
 * outcomes and failure reasons by count, time to READY=1, to Ready accepted and to the end by percentile, and the
 * steps by total time with the one that dominates first.
 */
import { formatDuration } from './dot.js';
import type { Distribution, FleetSummary } from './fleet-stats.js';
import { terminalSafe } from '../core/terminal-text.js';

/** How many causes are listed under one reason, and how many steps, before the rest is summed up. */
export const TEXT_LIMITS = { causes: 5, steps: 12, names: 20 };

/** Text from a journal, an export or a file name, one line and safe to print. */
const plain = (text: string): string => terminalSafe(text);

const share = (count: number, total: number): string => (total ? `${((100 * count) / total).toFixed(1)}%` : '-');
const ms = (value: number): string => (Number.isFinite(value) ? formatDuration(value) : '-');

/** A table of rows as columns: the first left-aligned, the others right-aligned. */
export function columns(rows: string[][], indent = '  '): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => indent + row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ').trimEnd());
}

const distributionCells = (d: Distribution): string[] => [String(d.n), ms(d.p50), ms(d.p90), ms(d.p99), ms(d.max)];

/** The heading line: runs read, the share that ended well, and what could not be counted. */
function heading(summary: FleetSummary): string {
  const read = summary.runs + summary.unreadable.length + summary.skipped.length;
  const extra = [
    summary.unreadable.length ? `${summary.unreadable.length} unreadable` : '',
    summary.truncated.length ? `${summary.truncated.length} truncated` : '',
    summary.skipped.length ? `${summary.skipped.length} skipped` : '',
  ].filter(Boolean);
  return `${summary.runs} runs from ${read} sources: ${summary.ok} ok (${share(summary.ok, summary.runs)})${extra.length ? `, ${extra.join(', ')}` : ''}`;
}

function reasonLines(summary: FleetSummary): string[] {
  if (summary.reasons.length === 0) return ['failure reasons: none'];
  const rows: string[][] = [];
  for (const reason of summary.reasons) {
    rows.push([plain(reason.key), String(reason.count), share(reason.count, summary.runs)]);
    for (const cause of reason.causes.slice(0, TEXT_LIMITS.causes)) rows.push([`  ${plain(cause.key)}`, String(cause.count), '']);
    const rest = reason.causes.slice(TEXT_LIMITS.causes).reduce((sum, cause) => sum + cause.count, 0);
    if (rest) rows.push([`  (${reason.causes.length - TEXT_LIMITS.causes} other causes)`, String(rest), '']);
  }
  return ['failure reasons (the report\'s reason, then the cause in words)', ...columns(rows)];
}

function timeLines(summary: FleetSummary): string[] {
  const { ready, accepted, total } = summary.times;
  return [
    'time from the run\'s start (its first journal line)',
    ...columns([
      ['', 'runs', 'p50', 'p90', 'p99', 'max'],
      ['READY=1 (logins may start)', ...distributionCells(ready)],
      ['Ready accepted by the fabric', ...distributionCells(accepted)],
      ['whole run', ...distributionCells(total)],
    ]),
  ];
}

function stepLines(summary: FleetSummary): string[] {
  if (summary.states.length === 0) return ['steps: none timed'];
  const top = summary.states[0]!;
  const busiest = [...summary.states].sort((a, b) => b.slowestIn - a.slowestIn)[0]!;
  const rows = [['', 'runs', 'p50', 'p90', 'p99', 'max', 'total', 'slowest in']];
  for (const state of summary.states.slice(0, TEXT_LIMITS.steps)) rows.push([plain(state.state), ...distributionCells(state), ms(state.totalMs), String(state.slowestIn)]);
  const rest = summary.states.length - TEXT_LIMITS.steps;
  return [
    `slowest step: ${plain(top.state)} (${ms(top.totalMs)} in all, p90 ${ms(top.p90)}); most often the slowest of its run: ${plain(busiest.state)} (${busiest.slowestIn} runs)`,
    'steps by total time (leaf states that run an actor or wait between retries)',
    ...columns(rows),
    ...(rest > 0 ? [`  (${rest} more steps: --json lists them all)`] : []),
  ];
}

function namedLines(title: string, entries: Array<{ source: string; why?: string }>): string[] {
  if (entries.length === 0) return [];
  const shown = entries.slice(0, TEXT_LIMITS.names).map((entry) => `  ${plain(entry.source)}${entry.why ? `: ${plain(entry.why)}` : ''}`);
  const rest = entries.length - shown.length;
  return [title, ...shown, ...(rest > 0 ? [`  (${rest} more: --json lists them all)`] : [])];
}

/** The whole text view, lines joined, ending in a newline. */
export function fleetText(summary: FleetSummary): string {
  const outcomes = columns(summary.outcomes.map((o) => [plain(o.key), String(o.count), share(o.count, summary.runs)]));
  const sections = [
    [heading(summary)],
    ['outcomes', ...outcomes],
    reasonLines(summary),
    timeLines(summary),
    stepLines(summary),
    namedLines('unreadable (not counted)', summary.unreadable),
    namedLines('truncated (a torn last line dropped; counted)', summary.truncated.map((source) => ({ source }))),
    namedLines('skipped (not a provisioning journal)', summary.skipped),
  ];
  return `${sections.filter((lines) => lines.length).map((lines) => lines.join('\n')).join('\n\n')}\n`;
}
