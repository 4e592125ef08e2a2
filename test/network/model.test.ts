/**
 * The network chart (machines/network.ts) against its oracle (oracle.ts): every path the oracle can take, played on
 * the interpreter with gated actors and a SimulatedClock, compared at each step; proof that those paths take every
 * transition of every state node of the chart (timers and invoke done/error included), so a transition added without
 * a path fails here; and three wrong charts the same check must reject, so it can fail at all.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateMachine, AnyTransitionDefinition } from 'xstate';
import { getStateNodes } from 'xstate/graph';
import { networkMachine } from '../../machines/network.js';
import { mutantsOf } from '../mutation/mutants.js';
import { describePath, firstDisagreement, networkPaths, play } from './check.js';

const machine = networkMachine as unknown as AnyStateMachine;

/** A stable name for a transition, the same for the chart and for a copy built from its config. */
function transitionKey(t: AnyTransitionDefinition): string {
  const siblings = t.source.transitions.get(t.eventType) ?? [];
  return `${t.source.id} --${t.eventType}[${siblings.findIndex((s) => s === t)}]--> ${(t.target ?? []).map((n) => n.id).join(',') || '(self)'}`;
}

const everyTransition = new Set(
  [machine.root, ...getStateNodes(machine.root)].flatMap((node) => [...node.transitions.values()].flat().concat(node.always ?? []).map(transitionKey)),
);

const paths = networkPaths();
const observed = new Set<string>();

describe('the network chart against its oracle', () => {
  it('reaches every end the oracle knows, each actor answering, failing and outlived', () => {
    const names = paths.map(describePath);
    expect(new Set(names).size).toBe(paths.length);
    for (const end of ['apply done', 'no plan', 'no stack', 'fetchDocument failed', 'plan failed (retryable)', 'inspect failed (retryable)', 'render failed (retryable)', 'apply failed (retryable)']) {
      expect(names.some((n) => n.endsWith(end)), end).toBe(true);
    }
    expect(names.filter((n) => n.endsWith('clock at 3500 ms')).length, 'IMDS outlived while asking and while waiting').toBeGreaterThanOrEqual(2);
    expect(names.some((n) => /render done → clock at \d+ ms$/.test(n)), 'the configure deadline during apply').toBe(true);
  });

  for (const steps of paths) {
    it(describePath(steps), () => play(machine, steps, (t) => observed.add(transitionKey(t))));
  }

  it('took every transition of every state node on those paths', () => {
    expect(everyTransition.size).toBeGreaterThan(10);
    expect([...everyTransition].filter((t) => !observed.has(t))).toEqual([]);
  });
});

describe('the check fails for a wrong chart', () => {
  const mutants = mutantsOf(machine);
  const wrong = [
    // IMDS outlived is `kept` (the image's configuration stays), not `failed`.
    'network.fetching after totalTimeout[0] retarget → network.failed',
    // A stack found goes on to render bootstate's files, not straight to applying.
    'network.configuring.inspecting done inspect[0] retarget → network.configuring.applying',
  ];
  for (const id of wrong) {
    it(id, async () => {
      const mutant = mutants.find((m) => m.id === id);
      expect(mutant, 'the mutant exists').toBeDefined();
      const disagreement = await firstDisagreement(mutant!.build());
      expect(disagreement, 'a path on which the mutant and the oracle disagree').not.toBeNull();
    });
  }

  // Every deadline step is also checked a millisecond before it falls due, so a timer firing early shows.
  it('network.configuring after configureTimeout falls due 1 ms early', async () => {
    const early = machine.provide({ delays: { configureTimeout: ({ context }: { context: { configureTimeoutMs: number } }) => context.configureTimeoutMs - 1 } as never });
    expect(await firstDisagreement(early)).toMatchObject({ message: expect.stringMatching(/^after clock at \d+99 ms: /) });
  });
});
