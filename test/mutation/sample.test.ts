/**
 * A fixed sample of the mutation check (`npm run mutate` runs all of them): every 50th single-transition mutant
 * of each chart must be killed by that chart's paths compared with its oracle (the real chart passing each killing
 * path), or be one of the listed equivalent mutants. Also checks that the enumeration covers every transition, so
 * transitions added later are mutated too. Every 50th rather than every 25th since the pool's states doubled the
 * chart's paths: the sample is `npm test`'s quick guard, and `.ci/run` runs the whole check right after it.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateNode } from 'xstate';
import { CHARTS, type Chart } from './charts.js';
import { equivalence } from './equivalent.js';
import { ENTRY_KINDS, mutantsOf } from './mutants.js';
import { recordedKillers } from './kill-set.js';
import { Judge } from './verdict.js';

/** One judge per chart, its paths computed once for the whole file; it tries the recorded kill-set's paths first. */
const judges = new Map<Chart, Promise<Judge>>();
const judgeOf = (chart: Chart) => judges.get(chart) ?? judges.set(chart, Judge.of(chart, 'kills', {}, recordedKillers(chart.name))).get(chart)!;

const allNodes = (node: AnyStateNode): AnyStateNode[] => [node, ...Object.values(node.states).flatMap((c) => allNodes(c as AnyStateNode))];

describe('mutation check', () => {
  it('kills a mutant caught in an endless loop of eventless transitions instead of hanging with it', async () => {
    const chart = CHARTS.find((c) => c.name === 'provisioning')!;
    // With the host keys and sshd left out, the region's two states hand over to each other for ever: never final,
    // never a step to wait for.
    const looping = mutantsOf(chart.machine).find((m) => m.id.endsWith('sshd.configuring always[0] retarget → provisioning.provisioning.work.configuringOs.sshd.awaitingHostKeys'));
    expect(looping, 'the looping mutant').toBeDefined();
    const verdict = await (await judgeOf(chart)).judge(looping!);
    expect(verdict.killed).toBe(true);
    expect(verdict.by).toContain('microsteps for one event: an endless loop');
  }, 120_000);


  // A chart that tells systemd READY too early, too late or never must fail the checks.
  it('kills every mutant that drops or moves READY=1', async () => {
    const chart = CHARTS.find((c) => c.name === 'provisioning')!;
    const ready = mutantsOf(chart.machine).filter((m) => m.id.includes('tellSystemdReady'));
    expect(ready.length).toBeGreaterThan(8);
    const judge = await judgeOf(chart);
    const survivors: string[] = [];
    for (const mutant of ready) if (!(await judge.judge(mutant)).killed) survivors.push(mutant.meaning);
    expect(survivors).toEqual([]);
  }, 600_000);

  for (const chart of CHARTS) {
    it(`mutates every entry action of ${chart.file}: dropped, and moved to each neighbouring state`, () => {
      const mutants = mutantsOf(chart.machine);
      for (const node of allNodes(chart.machine.root)) {
        // The config's own entry actions: node.entry also holds the timers XState adds for `after`.
        const own = (node.config as { entry?: unknown }).entry;
        const actions = own === undefined ? 0 : Array.isArray(own) ? own.length : 1;
        expect(mutants.filter((m) => m.kind === 'entry dropped' && m.edge === `${node.id} entry`)).toHaveLength(actions);
        if (actions) expect(mutants.some((m) => m.kind === 'entry moved' && m.edge === `${node.id} entry`)).toBe(true);
      }
    });

    it(`mutates every transition of ${chart.file}`, () => {
      const edges = new Set(mutantsOf(chart.machine).filter((m) => !ENTRY_KINDS.has(m.kind)).map((m) => m.edge));
      const transitions = allNodes(chart.machine.root).reduce((n, node) => n + [...node.transitions.values()].flat().length + (node.always?.length ?? 0), 0);
      expect(edges.size).toBe(transitions);
    });

    // A listed equivalent mutant survives by argument; playing every path on it would only cost time.
    const sample = mutantsOf(chart.machine).filter((m, i) => i % 50 === 0 && equivalence(chart.name, m) === null);
    for (const mutant of sample) {
      it(`${chart.name}: ${mutant.id} is killed`, async () => {
        const verdict = await (await judgeOf(chart)).judge(mutant);
        expect(verdict.killed, `survivor: ${mutant.meaning}`).toBe(true);
        // A mutant deep in the OS steps plays its paths in about 66 s on an idle 2-core machine: room for twice that and more.
      }, 300_000);
    }
  }
});
