/**
 * The run as a timeline (a Gantt chart in plain HTML): one row per top-level state and per parallel region, its
 * bar split into the states it went through, so retries, waits and the work running side by side show at a glance.
 */
import { formatDuration } from './dot.js';
import { activePaths } from '../core/state-path.js';
import type { MachineGraph } from './graph.js';
import type { JournalLine } from './journal.js';
import { stateName } from './words.js';

export interface TimelineSegment {
  state: string;
  start: number;
  end: number;
  /** The segment stands for several, merged to keep a long run's row bounded: `state` is the longest of them. */
  mixed?: true;
}

export interface TimelineRow {
  state: string;
  depth: number;
  segments: TimelineSegment[];
  ms: number;
}

/**
 * Most segments a row keeps. A longer run's row is halved by merging neighbours, each pair drawn in the colour of
 * its longer part: a bar of 1/2000 of the track is under a pixel wide anyway, and the row stays bounded in memory
 * and in the page however long the journal is.
 */
export const MAX_SEGMENTS = 4096;

function halve(segments: TimelineSegment[]): TimelineSegment[] {
  const out: TimelineSegment[] = [];
  for (let i = 0; i < segments.length; i += 2) {
    const a = segments[i]!;
    const b = segments[i + 1];
    if (!b) out.push(a);
    else out.push({ state: b.end - b.start > a.end - a.start ? b.state : a.state, start: a.start, end: b.end, mixed: true });
  }
  return out;
}

/**
 * Builds the timeline one journal line at a time (a line's segment ends at the next line's time, so each line is
 * placed once the next one, or the end, is known); only the segments are kept, merged while the state stays.
 */
export class TimelineBuilder {
  readonly #graph: MachineGraph;
  readonly #rows = new Map<string, TimelineRow>();
  readonly #depth = new Map<string, number>();
  #start = 0;
  #pending: JournalLine | undefined;
  #lastT: string | undefined;

  constructor(graph: MachineGraph) {
    this.#graph = graph;
  }

  add(line: JournalLine): void {
    if (this.#pending) this.#place(this.#pending, line);
    else this.#start = Date.parse(line.t);
    this.#pending = line;
    this.#lastT = line.t;
  }

  #depthOf(id: string): number {
    let depth = this.#depth.get(id);
    if (depth === undefined) {
      const graph = this.#graph;
      depth = 0;
      for (let at = graph.nodes.get(id)?.parent; at && at !== graph.root; at = graph.nodes.get(at)?.parent) depth++;
      this.#depth.set(id, depth);
    }
    return depth;
  }

  #isRow(id: string): boolean {
    const graph = this.#graph;
    const parent = graph.nodes.get(id)?.parent;
    return parent === graph.root || graph.nodes.get(parent ?? '')?.type === 'parallel';
  }

  #place(line: JournalLine, next: JournalLine | undefined): void {
    const graph = this.#graph;
    const from = Date.parse(line.t) - this.#start;
    const to = next ? Date.parse(next.t) - this.#start : from;
    const active = activePaths(line.value, graph.root).filter((id) => graph.nodes.has(id));
    const leaves = active.filter((id) => !graph.nodes.get(id)!.children.length || !active.some((other) => graph.nodes.get(other)?.parent === id));
    for (const id of active.filter((candidate) => this.#isRow(candidate))) {
      const row = this.#rows.get(id) ?? { state: id, depth: this.#depthOf(id), segments: [], ms: 0 };
      this.#rows.set(id, row);
      row.ms += to - from;
      const leaf = leaves.find((candidate) => candidate === id || candidate.startsWith(`${id}.`)) ?? id;
      const last = row.segments[row.segments.length - 1];
      if (last && last.state === leaf && last.end === from) last.end = to;
      else row.segments.push({ state: leaf, start: from, end: to });
      if (row.segments.length > MAX_SEGMENTS) row.segments = halve(row.segments);
    }
  }

  finish(): { rows: TimelineRow[]; total: number } {
    if (this.#pending) this.#place(this.#pending, undefined);
    this.#pending = undefined;
    const total = this.#lastT !== undefined ? Math.max(1, Date.parse(this.#lastT) - this.#start) : 1;
    const order = new Map([...this.#graph.nodes.keys()].map((id, index) => [id, index]));
    return { rows: [...this.#rows.values()].sort((a, b) => (order.get(a.state) ?? -1) - (order.get(b.state) ?? -1)), total };
  }
}

/** Rows for every visited top-level state and parallel region, with offsets in ms from the run's start. */
export function timelineRows(graph: MachineGraph, lines: JournalLine[]): { rows: TimelineRow[]; total: number } {
  const builder = new TimelineBuilder(graph);
  for (const line of lines) builder.add(line);
  return builder.finish();
}

/** The timeline as HTML; every name is escaped with `escape`. */
export function timelineHtml(graph: MachineGraph, lines: JournalLine[], escape: (text: string) => string): string {
  return timelineRowsHtml(graph, timelineRows(graph, lines), escape);
}

/** Rows built already (by a TimelineBuilder) as HTML. */
export function timelineRowsHtml(graph: MachineGraph, { rows, total }: { rows: TimelineRow[]; total: number }, escape: (text: string) => string): string {
  const percent = (ms: number): string => `${((ms / total) * 100).toFixed(3)}%`;
  const palette = ['#6e9fd8', '#c7ccd4', '#8cc79a', '#e3b35c', '#b49ad6', '#e38a8a'];
  const body = rows
    .map((row) => {
      const colours = new Map<string, string>();
      const bars = row.segments
        .map((segment) => {
          if (!colours.has(segment.state)) colours.set(segment.state, palette[colours.size % palette.length]!);
          const name = stateName(graph.root, segment.state);
          const tip = `${segment.mixed ? `mostly ${name}` : name}: ${formatDuration(segment.end - segment.start)}`;
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
