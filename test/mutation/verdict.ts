/**
 * Whether a mutant is killed: the first path on which it shows the world something its oracle does not expect.
 * The same paths as the model tests; only their order is chosen for speed. Paths that killed mutants of the same
 * transition come first, then paths that killed any mutant (most recent first; at the start, the recorded kill-set),
 * then the rest; the mutant's own model paths are traversed only when no fixed path kills it. A kill on a fixed path
 * counts only if the real chart passes that path.
 */
import type { AnyStateMachine } from 'xstate';
import type { Chart, CheckPath } from './charts.js';
import type { Mutant } from './mutants.js';

export interface Verdict {
  killed: boolean;
  /** The killing path and the difference it showed. */
  by?: string;
  /** The killing path when it is one of the chart's fixed paths (what the kill-set records). */
  path?: { id: string; name: string };
  /** Paths played. */
  played: number;
}

/** Told what the judge does, for a caller that watches for a stuck mutant. */
export interface Watch {
  /** A path starts: it takes milliseconds on the real chart. */
  playing?(name: string): void;
  /** A long computation starts (generating paths): it may take minutes on a loaded machine. */
  busy?(what: string): void;
}

export class Judge {
  private readonly recent: number[] = [];
  private readonly byEdge = new Map<string, number[]>();

  private constructor(
    private readonly chart: Chart,
    private readonly fixed: CheckPath[],
    private readonly watch: Watch,
  ) {}

  /**
   * Computes the chart's fixed paths. With `verify` 'all' the real chart is played on each of them and on its own
   * paths at once; with 'kills' only on each killing path (the model tests play the others). Either way a path the
   * real chart fails is an error, not a kill. `first`: ids of paths to try before the others (the recorded kill-set,
   * most killing first), as if they had just killed.
   */
  static async of(chart: Chart, verify: 'all' | 'kills' = 'all', watch: Watch = {}, first: string[] = []): Promise<Judge> {
    watch.busy?.(`computing the paths of ${chart.file}`);
    const judge = new Judge(chart, await chart.fixedPaths(), watch);
    const index = new Map(judge.fixed.map((p, i) => [p.id, i]));
    for (const id of [...first].reverse()) if (index.has(id)) judge.recent.push(index.get(id)!);
    if (verify === 'all') for (const path of [...judge.fixed, ...chart.ownPaths(chart.machine)]) await judge.verify(path);
    return judge;
  }

  private async verify(path: CheckPath) {
    const message = await this.fails(path, this.chart.machine);
    if (message !== null) throw new Error(`${this.chart.file} itself disagrees with its oracle on ${path.name}: ${message}`);
  }

  get paths(): number {
    return this.fixed.length;
  }

  async judge(mutant: Mutant): Promise<Verdict> {
    let machine: AnyStateMachine;
    try {
      machine = mutant.build();
    } catch (error) {
      return { killed: true, by: `the mutant does not build: ${(error as Error).message}`, played: 0 };
    }
    let played = 0;
    for (const index of this.order(mutant.edge)) {
      played++;
      const message = await this.fails(this.fixed[index]!, machine);
      if (message === null) continue;
      await this.verify(this.fixed[index]!);
      this.remember(mutant.edge, index);
      return { killed: true, by: `${this.fixed[index]!.name}: ${message}`, path: { id: this.fixed[index]!.id, name: this.fixed[index]!.name }, played };
    }
    let own: CheckPath[];
    try {
      this.watch.busy?.(`traversing the mutant ${mutant.id}`);
      own = this.chart.ownPaths(machine);
    } catch (error) {
      return { killed: true, by: `(traversal of the mutant) ${String(error)}`, played };
    }
    for (const path of own) {
      played++;
      const message = await this.fails(path, machine);
      if (message === null) continue;
      // As the model tests of the mutant would: its own path, compared with the oracle. (The path may take an
      // event the real chart never offers at that point, so the real chart is not played on it.)
      return { killed: true, by: `(own path) ${path.name}: ${message}`, played };
    }
    return { killed: false, played };
  }

  private async fails(path: CheckPath, machine: AnyStateMachine): Promise<string | null> {
    this.watch.playing?.(path.name);
    try {
      await path.play(machine);
      return null;
    } catch (error) {
      return (error as Error).message;
    }
  }

  private order(edge: string): number[] {
    const seen = new Set<number>();
    const order: number[] = [];
    const add = (i: number) => {
      if (seen.has(i)) return;
      seen.add(i);
      order.push(i);
    };
    for (const i of this.byEdge.get(edge) ?? []) add(i);
    for (let k = this.recent.length - 1; k >= 0; k--) add(this.recent[k]!);
    for (let i = 0; i < this.fixed.length; i++) add(i);
    return order;
  }

  private remember(edge: string, index: number) {
    const same = this.byEdge.get(edge) ?? [];
    if (!same.includes(index)) same.push(index);
    this.byEdge.set(edge, same);
    const at = this.recent.indexOf(index);
    if (at >= 0) this.recent.splice(at, 1);
    this.recent.push(index);
  }
}
