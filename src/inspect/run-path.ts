/**
 * What a journal says about one run, in the terms of the chart: the states it passed (and at which steps), the
 * edges it took, how long each state was active, and how it ended.
 */
import type { DotHighlight } from './dot.js';
import { activePaths } from './edge-key.js';
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
function edgeTargets(key: string): string[] {
  const match = / -> (.*) on /.exec(key);
  if (!match || match[1] === '(internal)') return [];
  return match[1]!.split(', ');
}

/** Derives the visited states, taken edges, timings and outcome of a run from its journal lines. */
export function analyseRun(graph: MachineGraph, lines: JournalLine[]): RunPath {
  const visited = new Map<string, number[]>();
  const edges = new Map<string, number[]>();
  const timing = new Map<string, StateTiming>();
  const timingOf = (state: string): StateTiming => {
    let entry = timing.get(state);
    if (!entry) timing.set(state, (entry = { state, visits: 0, ms: 0, steps: [] }));
    return entry;
  };
  let previous = new Set<string>();
  lines.forEach((line, index) => {
    const step = line.seq;
    const active = new Set(activePaths(graph.root, line.value).filter((state) => graph.nodes.has(state)));
    const passed = new Set<string>();
    for (const key of line.transitions) {
      add(edges, key, step);
      for (const target of edgeTargets(key)) if (graph.nodes.has(target)) passed.add(target);
    }
    const next = lines[index + 1];
    const span = next ? Math.max(0, Date.parse(next.t) - Date.parse(line.t)) : 0;
    for (const state of active) {
      add(visited, state, step);
      const entry = timingOf(state);
      if (!previous.has(state) || passed.has(state)) entry.visits++;
      if (entry.steps[entry.steps.length - 1] !== step) entry.steps.push(step);
      entry.ms += span;
    }
    for (const state of passed) {
      if (active.has(state)) continue;
      add(visited, state, step);
      const entry = timingOf(state);
      entry.visits++;
      entry.steps.push(step);
    }
    previous = active;
  });
  const last = lines[lines.length - 1];
  const complete = last?.status === 'done';
  const output = last?.output;
  const ok = complete && (output?.exitCode === undefined ? output?.result !== 'failed' : output.exitCode === 0);
  const leaves = last ? activePaths(graph.root, last.value).filter((state) => graph.nodes.get(state)?.children.length === 0) : [];
  const finalLeaf = leaves.find((state) => graph.nodes.get(state)?.type === 'final' && graph.nodes.get(state)?.parent === graph.root);
  const order = [...graph.nodes.keys()];
  return {
    visited,
    edges,
    timings: [...timing.values()].sort((a, b) => order.indexOf(a.state) - order.indexOf(b.state)),
    outcome: ok ? 'ok' : 'failed',
    complete,
    last: finalLeaf ?? leaves[leaves.length - 1],
    startedAt: lines[0]?.t,
    endedAt: last?.t,
  };
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
