/**
 * A fixed sample of the mutation check (`npm run mutate` runs all of them): every 25th single-transition mutant
 * of each chart must be killed by that chart's oracle checks, or be one of the listed equivalent mutants. Also
 * checks that the enumeration covers every transition, so transitions added later are mutated too.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateNode } from 'xstate';
import { CHARTS } from './charts.js';
import { equivalence } from './equivalent.js';
import { mutantsOf } from './mutants.js';

const allNodes = (node: AnyStateNode): AnyStateNode[] => [node, ...Object.values(node.states).flatMap((c) => allNodes(c as AnyStateNode))];

describe('mutation check', () => {
  for (const chart of CHARTS) {
    it(`mutates every transition of ${chart.file}`, () => {
      const edges = new Set(mutantsOf(chart.machine).map((m) => m.edge));
      const transitions = allNodes(chart.machine.root).reduce((n, node) => n + [...node.transitions.values()].flat().length + (node.always?.length ?? 0), 0);
      expect(edges.size).toBe(transitions);
    });

    const sample = mutantsOf(chart.machine).filter((_, i) => i % 25 === 0);
    for (const mutant of sample) {
      it(`${chart.name}: ${mutant.id} is killed or equivalent`, async () => {
        const found = await chart.check(mutant.build());
        if (!found) expect(equivalence(chart.name, mutant), `survivor: ${mutant.meaning}`).not.toBeNull();
      }, 120_000);
    }
  }
});
