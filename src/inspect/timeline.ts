/**
 * The run as a timeline (a Gantt chart in plain HTML): one row per top-level state and per parallel region, its
 * bar split into the states it went through, so retries, waits and the work running side by side show at a glance.
 */
import { formatDuration } from './dot.js';
import { activePaths } from './edge-key.js';
import type { MachineGraph } from './graph.js';
import type { JournalLine } from './journal.js';
import { stateName } from './words.js';

export interface TimelineRow {
  state: string;
  depth: number;
  segments: Array<{ state: string; start: number; end: number }>;
  ms: number;
}

/** Rows for every visited top-level state and parallel region, with offsets in ms from the run's start. */
export function timelineRows(graph: MachineGraph, lines: JournalLine[]): { rows: TimelineRow[]; total: number } {
  const start = lines.length ? Date.parse(lines[0]!.t) : 0;
  const total = lines.length ? Math.max(1, Date.parse(lines[lines.length - 1]!.t) - start) : 1;
  const depthOf = (id: string): number => {
    let depth = 0;
    for (let at = graph.nodes.get(id)?.parent; at && at !== graph.root; at = graph.nodes.get(at)?.parent) depth++;
    return depth;
  };
  const isRow = (id: string): boolean => {
    const parent = graph.nodes.get(id)?.parent;
    return parent === graph.root || graph.nodes.get(parent ?? '')?.type === 'parallel';
  };
  const rows = new Map<string, TimelineRow>();
  lines.forEach((line, index) => {
    const from = Date.parse(line.t) - start;
    const to = index + 1 < lines.length ? Date.parse(lines[index + 1]!.t) - start : from;
    const active = activePaths(graph.root, line.value).filter((id) => graph.nodes.has(id));
    const leaves = active.filter((id) => !graph.nodes.get(id)!.children.length || !active.some((other) => graph.nodes.get(other)?.parent === id));
    for (const id of active.filter(isRow)) {
      const row = rows.get(id) ?? { state: id, depth: depthOf(id), segments: [], ms: 0 };
      rows.set(id, row);
      row.ms += to - from;
      const leaf = leaves.find((candidate) => candidate === id || candidate.startsWith(`${id}.`)) ?? id;
      const last = row.segments[row.segments.length - 1];
      if (last && last.state === leaf && last.end === from) last.end = to;
      else row.segments.push({ state: leaf, start: from, end: to });
    }
  });
  const order = [...graph.nodes.keys()];
  return { rows: [...rows.values()].sort((a, b) => order.indexOf(a.state) - order.indexOf(b.state)), total };
}

/** The timeline as HTML; every name is escaped with `escape`. */
export function timelineHtml(graph: MachineGraph, lines: JournalLine[], escape: (text: string) => string): string {
  const { rows, total } = timelineRows(graph, lines);
  const percent = (ms: number): string => `${((ms / total) * 100).toFixed(3)}%`;
  const palette = ['#6e9fd8', '#c7ccd4', '#8cc79a', '#e3b35c', '#b49ad6', '#e38a8a'];
  const body = rows
    .map((row) => {
      const colours = new Map<string, string>();
      const bars = row.segments
        .map((segment) => {
          if (!colours.has(segment.state)) colours.set(segment.state, palette[colours.size % palette.length]!);
          const name = stateName(graph.root, segment.state);
          const tip = `${name}: ${formatDuration(segment.end - segment.start)}`;
          return `<span class="bar" style="left:${percent(segment.start)};width:${percent(segment.end - segment.start)};background:${colours.get(segment.state)}" title="${escape(tip)}"></span>`;
        })
        .join('');
      const name = graph.nodes.get(row.state)!.key;
      return `<div class="row" data-state="${escape(stateName(graph.root, row.state))}"><span class="name" style="padding-left:${row.depth * 14}px" title="${escape(stateName(graph.root, row.state))}">${escape(name)}</span><span class="track">${bars}</span><span class="dur">${escape(formatDuration(row.ms))}</span></div>`;
    })
    .join('\n');
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => `<span style="left:${(f * 100).toFixed(0)}%">${escape(formatDuration(f * total))}</span>`).join('');
  return `<div id="timeline" class="gantt">\n${body}\n<div class="row axis"><span class="name"></span><span class="track ticks">${ticks}</span><span class="dur"></span></div></div>`;
}

export const TIMELINE_CSS = `
.gantt { font-size: 13px; border: 1px solid #d1d9e0; border-radius: 6px; padding: 6px 10px; }
.gantt .row { display: grid; grid-template-columns: minmax(120px, 220px) 1fr 70px; align-items: center; gap: 8px; min-height: 20px; }
.gantt .name { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.gantt .track { position: relative; height: 14px; background: #f6f8fa; border-radius: 3px; }
.gantt .bar { position: absolute; top: 1px; bottom: 1px; min-width: 2px; border-radius: 2px; }
.gantt .dur { text-align: right; font-variant-numeric: tabular-nums; color: #59636e; }
.gantt .ticks { background: none; height: 16px; font-size: 11px; color: #59636e; }
.gantt .ticks span { position: absolute; transform: translateX(-50%); white-space: nowrap; }
.gantt .ticks span:first-child { transform: none; } .gantt .ticks span:last-child { transform: translateX(-100%); }
`;
