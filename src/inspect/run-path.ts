/**
 * What a journal says about one run, in the terms of the chart: the states it passed (and at which steps), the
 * edges it took, how long each state was active, and how it ended.
 */
import type { DotHighlight } from './dot.js';
import { activePaths } from '../core/state-path.js';
import type { MachineGraph } from './graph.js';
import type { JournalLine } from './journal.js';

export interface StateTiming {
  state: string;
  /** How many times the state was entered. */
  visits: number;
  /** Milliseconds active, summed over visits; states passed within one macrostep count 0. */
  ms: number;
  steps: number[];
}

export interface RunPath {
  visited: Map<string, number[]>;
  edges: Map<string, number[]>;
  timings: StateTiming[];
  outcome: 'ok' | 'failed';
  /** False when the journal ends before a final state (a crash or a kill). */
  complete: boolean;
  /** The state the run ended in. */
  last?: string;
  startedAt?: string;
  endedAt?: string;
}

const add = (map: Map<string, number[]>, key: string, step: number): void => {
  const steps = map.get(key) ?? [];
  if (steps[steps.length - 1] !== step) steps.push(step);
  map.set(key, steps);
};

/** The targets named by an edge key, so states passed through inside one macrostep count as visited. */
export function edgeTargets(key: string): string[] {
  const match = / -> (.*) on /.exec(key);
  if (!match || match[1] === '(internal)') return [];
  return match[1]!.split(', ');
}

/**
 * Reads a run's journal one line at a time, keeping only what the page shows (per state and edge: its steps and
 * time; the first and last line), never the lines themselves: a journal of any length is analysed in bounded
 * memory besides the step numbers. A line's time in its states runs to the next line, so each line is counted
 * once the next one (or the end) is known.
 */
export class RunAnalysis {
  readonly #graph: MachineGraph;
  readonly #visited = new Map<string, number[]>();
  readonly #edges = new Map<string, number[]>();
  readonly #timing = new Map<string, StateTiming>();
  #previous = new Set<string>();
  #pending: JournalLine | undefined;
  #first: JournalLine | undefined;
  #count = 0;

  constructor(graph: MachineGraph) {
    this.#graph = graph;
  }

  /** The next journal line. */
  add(line: JournalLine): void {
    if (this.#pending) this.#tally(this.#pending, line);
    else this.#first = line;
    this.#pending = line;
    this.#count++;
  }

  get first(): JournalLine | undefined {
    return this.#first;
  }

  /** The last line added. */
  get last(): JournalLine | undefined {
    return this.#pending;
  }

  /** How many lines were added. */
  get lines(): number {
    return this.#count;
  }

  #timingOf(state: string): StateTiming {
    let entry = this.#timing.get(state);
    if (!entry) this.#timing.set(state, (entry = { state, visits: 0, ms: 0, steps: [] }));
    return entry;
  }

  #tally(line: JournalLine, next: JournalLine | undefined): void {
    const graph = this.#graph;
    const step = line.seq;
    const active = new Set(activePaths(line.value, graph.root).filter((state) => graph.nodes.has(state)));
    const passed = new Set<string>();
    for (const key of line.transitions) {
      add(this.#edges, key, step);
      for (const target of edgeTargets(key)) if (graph.nodes.has(target)) passed.add(target);
    }
    const span = next ? Math.max(0, Date.parse(next.t) - Date.parse(line.t)) : 0;
    for (const state of active) {
      add(this.#visited, state, step);
      const entry = this.#timingOf(state);
      if (!this.#previous.has(state) || passed.has(state)) entry.visits++;
      if (entry.steps[entry.steps.length - 1] !== step) entry.steps.push(step);
      entry.ms += span;
    }
    for (const state of passed) {
      if (active.has(state)) continue;
      add(this.#visited, state, step);
      const entry = this.#timingOf(state);
      entry.visits++;
      entry.steps.push(step);
    }
    this.#previous = active;
  }

  /** The run's path, once every line was added. */
  finish(): RunPath {
    const graph = this.#graph;
    const last = this.#pending;
    if (last) this.#tally(last, undefined);
    this.#pending = undefined;
    const complete = last?.status === 'done';
    const output = last?.output;
    const ok = complete && (output?.exitCode === undefined ? output?.result !== 'failed' : output.exitCode === 0);
    const leaves = last ? activePaths(last.value, graph.root).filter((state) => graph.nodes.get(state)?.children.length === 0) : [];
    const finalLeaf = leaves.find((state) => graph.nodes.get(state)?.type === 'final' && graph.nodes.get(state)?.parent === graph.root);
    const order = new Map([...graph.nodes.keys()].map((id, index) => [id, index]));
    return {
      visited: this.#visited,
      edges: this.#edges,
      timings: [...this.#timing.values()].sort((a, b) => (order.get(a.state) ?? -1) - (order.get(b.state) ?? -1)),
      outcome: ok ? 'ok' : 'failed',
      complete,
      last: finalLeaf ?? leaves[leaves.length - 1],
      startedAt: this.#first?.t,
      endedAt: last?.t,
    };
  }
}

/** Derives the visited states, taken edges, timings and outcome of a run from its journal lines. */
export function analyseRun(graph: MachineGraph, lines: JournalLine[]): RunPath {
  const analysis = new RunAnalysis(graph);
  for (const line of lines) analysis.add(line);
  return analysis.finish();
}

/** The DOT highlight for a run: visited states, taken edges and the end state marked ok or failed. */
export function highlightOf(run: RunPath): DotHighlight {
  return {
    visited: run.visited,
    edges: run.edges,
    durations: new Map(run.timings.map((timing) => [timing.state, timing.ms])),
    final: run.last ? { id: run.last, outcome: run.outcome } : undefined,
  };
}
