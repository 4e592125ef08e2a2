/**
 * The fleet view's arithmetic, kept apart from any reading or drawing: what one run contributes (`FleetRun`, made by
 * fleet-read.ts from a journal, or by any other reader from another source), and the distribution over many runs
 * (`aggregateFleet`): outcomes and failure reasons by count, time to READY=1, to Ready accepted and to the end by
 * percentile, and per state the distribution of its time, so the state that dominates shows.
 */

/** One run as the fleet view counts it; every time is in ms from the run's first journal line. */
export interface FleetRun {
  /** Where the run came from (a journal's path), to name it. */
  source: string;
  vmId: string;
  startedAt: string;
  /** `provisioned`, `failed`, `already-provisioned`, … from the run's output, or `incomplete` (no final state). */
  outcome: string;
  ok: boolean;
  /** Failed or incomplete runs: the encoded report's reason (`operation timed out`), or what stands in for it. */
  reason?: string;
  /** The failure in words (`IMDS did not answer usefully within 2 s; last error: …`). */
  cause?: string;
  exitCode?: number;
  readyMs?: number;
  acceptedMs?: number;
  totalMs: number;
  /** Leaf states' time in this run (ms summed over visits), by state name. */
  states: Record<string, number>;
  /** The journal's last line was torn (a crash mid-write) and dropped. */
  truncated?: boolean;
}

/** A source that could not be read as a run, and why. */
export interface Unreadable {
  source: string;
  why: string;
}

export interface Distribution {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface Counted {
  key: string;
  count: number;
}

export interface ReasonCount extends Counted {
  /** The causes told under this reason, most frequent first. */
  causes: Counted[];
}

export interface StateStats extends Distribution {
  state: string;
  /** Time in this state summed over every run. */
  totalMs: number;
  /** In how many runs this was the leaf state with the most time. */
  slowestIn: number;
}

export interface FleetSummary {
  runs: number;
  ok: number;
  outcomes: Counted[];
  reasons: ReasonCount[];
  times: { ready: Distribution; accepted: Distribution; total: Distribution };
  /** Most total time first. */
  states: StateStats[];
  truncated: string[];
  unreadable: Unreadable[];
  skipped: Unreadable[];
}

/**
 * The nearest-rank percentile of `sorted` (ascending): the smallest value with at least p% of the values at or
 * below it. NaN for no values.
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/** p50, p90, p99 and the maximum of `values` (any order; not changed). */
export function distributionOf(values: readonly number[]): Distribution {
  const sorted = Float64Array.from(values).sort();
  const list = Array.from(sorted);
  return { n: list.length, p50: percentile(list, 50), p90: percentile(list, 90), p99: percentile(list, 99), max: list.length ? list[list.length - 1]! : Number.NaN };
}

/** Counts of `keys`, most frequent first, ties by key. */
export function countBy(keys: Iterable<string>): Counted[] {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  return [...counts].map(([key, count]) => ({ key, count })).sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** The failure reasons of the runs that did not end well, each with its causes. */
function reasonsOf(runs: readonly FleetRun[]): ReasonCount[] {
  const failed = runs.filter((run) => !run.ok);
  const reasonKey = (run: FleetRun): string => run.reason ?? run.outcome;
  return countBy(failed.map(reasonKey)).map(({ key, count }) => ({
    key,
    count,
    causes: countBy(failed.filter((run) => reasonKey(run) === key && run.cause !== undefined).map((run) => run.cause!)),
  }));
}

/** Per leaf state: the distribution of its time over the runs that visited it, its total, where it was slowest. */
function statesOf(runs: readonly FleetRun[]): StateStats[] {
  const times = new Map<string, number[]>();
  const slowest = new Map<string, number>();
  for (const run of runs) {
    let top: string | undefined;
    for (const [state, ms] of Object.entries(run.states)) {
      let list = times.get(state);
      if (!list) times.set(state, (list = []));
      list.push(ms);
      if (top === undefined || ms > run.states[top]! || (ms === run.states[top]! && state < top)) top = state;
    }
    if (top !== undefined) slowest.set(top, (slowest.get(top) ?? 0) + 1);
  }
  const stats = [...times].map(([state, list]) => ({ state, ...distributionOf(list), totalMs: list.reduce((sum, ms) => sum + ms, 0), slowestIn: slowest.get(state) ?? 0 }));
  return stats.sort((a, b) => b.totalMs - a.totalMs || (a.state < b.state ? -1 : 1));
}

const defined = (values: Array<number | undefined>): number[] => values.filter((value): value is number => value !== undefined);

/** The fleet's distribution over `runs`, with the sources that could not be read or were not provisioning runs. */
export function aggregateFleet(runs: readonly FleetRun[], unreadable: readonly Unreadable[] = [], skipped: readonly Unreadable[] = []): FleetSummary {
  return {
    runs: runs.length,
    ok: runs.filter((run) => run.ok).length,
    outcomes: countBy(runs.map((run) => run.outcome)),
    reasons: reasonsOf(runs),
    times: {
      ready: distributionOf(defined(runs.map((run) => run.readyMs))),
      accepted: distributionOf(defined(runs.map((run) => run.acceptedMs))),
      total: distributionOf(runs.map((run) => run.totalMs)),
    },
    states: statesOf(runs),
    truncated: runs.filter((run) => run.truncated).map((run) => run.source),
    unreadable: [...unreadable],
    skipped: [...skipped],
  };
}
