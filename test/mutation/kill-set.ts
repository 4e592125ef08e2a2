/**
 * The kill-set: for each chart, the fixed paths (charts.ts: the oracle's own and the real chart's model paths) that
 * together kill every mutant killed on a fixed path — for each such mutant, the path that killed it first. `npm run
 * mutate` plays every path on every mutant and records the set in kill-set.json; `npm test` plays only these paths
 * (and the ones covering every transition) on the real chart, each step compared with the oracle. Paths are named by
 * their stable id: when the charts or the oracles change so that a recorded path is no longer generated, the tests
 * say so and ask for the set to be recorded again.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Chart } from './charts.js';

export interface KillSetEntry {
  /** The path's stable id (CheckPath.id). */
  id: string;
  /** Its readable name. */
  name: string;
  /** How many mutants it killed first. */
  kills: number;
  /** What the first of them does wrong, in words (the mutant's meaning): the behaviour the path pins down. */
  catches: string;
}

export interface ChartKillSet {
  paths: KillSetEntry[];
  /** Mutants killed elsewhere: on their own model paths, by not building, or by an endless loop. */
  killedElsewhere: number;
}

export interface KillSet {
  recorded: string;
  /** Whether every mutant of every chart was played (not `--sample N` or `--chart`): only then is it the kill-set. */
  complete: boolean;
  charts: Partial<Record<Chart['name'], ChartKillSet>>;
}

export const KILL_SET_FILE = fileURLToPath(new URL('./kill-set.json', import.meta.url));
export const RECORD_AGAIN = 'run `npm run mutate` to record the kill-set again (test/mutation/kill-set.json)';

export function readKillSet(file = KILL_SET_FILE): KillSet {
  return JSON.parse(readFileSync(file, 'utf8')) as KillSet;
}

/** The recorded paths of `chart` found among `paths` (by id), and the ids no longer generated. */
export function resolveKillSet<P extends { id: string }>(chart: Chart['name'], paths: P[], file = KILL_SET_FILE) {
  let set: KillSet;
  try {
    set = readKillSet(file);
  } catch (error) {
    return { complete: false, found: [], missing: [`(the kill-set: ${(error as Error).message})`] };
  }
  const byId = new Map(paths.map((p) => [p.id, p]));
  const entries = set.charts[chart]?.paths ?? [];
  return {
    complete: set.complete,
    found: entries.filter((e) => byId.has(e.id)).map((entry) => ({ entry, path: byId.get(entry.id)! })),
    missing: entries.filter((e) => !byId.has(e.id)).map((e) => e.id),
  };
}

/** What a mutation run found, mutant by mutant, in the order the chart's mutants are enumerated. */
export interface Kill {
  chart: Chart['name'];
  meaning: string;
  killed: boolean;
  /** The fixed path that killed it first, if one did. */
  path?: { id: string; name: string };
}

/** The union of the first killing paths, chart by chart, each path with the mutants it killed. */
export function killSetOf(kills: Kill[], complete: boolean, recorded = new Date().toISOString()): KillSet {
  const charts: KillSet['charts'] = {};
  for (const kill of kills) {
    if (!kill.killed) continue;
    const chart = (charts[kill.chart] ??= { paths: [], killedElsewhere: 0 });
    if (!kill.path) {
      chart.killedElsewhere++;
      continue;
    }
    const entry = chart.paths.find((e) => e.id === kill.path!.id);
    if (entry) entry.kills++;
    else chart.paths.push({ id: kill.path.id, name: kill.path.name, kills: 1, catches: kill.meaning });
  }
  return { recorded, complete, charts };
}

export function writeKillSet(set: KillSet, file = KILL_SET_FILE): void {
  writeFileSync(file, `${JSON.stringify(set, null, 1)}\n`);
}

/** The recorded paths of `chart`, most killing first (none when nothing is recorded): a judge tries them first. */
export function recordedKillers(chart: Chart['name'], file = KILL_SET_FILE): string[] {
  try {
    return [...(readKillSet(file).charts[chart]?.paths ?? [])].sort((a, b) => b.kills - a.kills).map((p) => p.id);
  } catch {
    return [];
  }
}
