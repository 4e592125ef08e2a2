/**
 * A fixed sample of the mutation check (`npm run mutate` runs all of them): every 25th single-transition mutant
 * of each chart must be killed by that chart's paths compared with its oracle (the real chart passing each killing
 * path), or be one of the listed equivalent mutants. Also checks that the enumeration covers every transition, so
 * transitions added later are mutated too.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateNode } from 'xstate';
import { CHARTS } from './charts.js';
import { equivalence } from './equivalent.js';
import { mutantsOf } from './mutants.js';
import { Judge } from './verdict.js';

const allNodes = (node: AnyStateNode): AnyStateNode[] => [node, ...Object.values(node.states).flatMap((c) => allNodes(c as AnyStateNode))];

describe('mutation check', () => {
  for (const chart of CHARTS) {
    it(`mutates every transition of ${chart.file}`, () => {
      const edges = new Set(mutantsOf(chart.machine).map((m) => m.edge));
      const transitions = allNodes(chart.machine.root).reduce((n, node) => n + [...node.transitions.values()].flat().length + (node.always?.length ?? 0), 0);
      expect(edges.size).toBe(transitions);
    });

    let judge: Promise<Judge> | null = null;
    // A listed equivalent mutant survives by argument; playing every path on it would only cost time.
    const sample = mutantsOf(chart.machine).filter((m, i) => i % 25 === 0 && equivalence(chart.name, m) === null);
    for (const mutant of sample) {
      it(`${chart.name}: ${mutant.id} is killed`, async () => {
        const verdict = await (await (judge ??= Judge.of(chart, 'kills'))).judge(mutant);
        expect(verdict.killed, `survivor: ${mutant.meaning}`).toBe(true);
      }, 120_000);
    }
  }
});
