/**
 * Every name test/support/chart.ts gives the provisioning chart is a state or an invoke of the real chart: a renamed
 * state or invoke id fails here, naming the entry to edit.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateNode } from 'xstate';
import { createProvisioningMachine } from '../../machines/provisioning.js';
import { MACHINE, nodeId, PREFIX, STATE, STEP, stateValue } from './chart.js';

const machine = createProvisioningMachine();
const nodes: AnyStateNode[] = [];
const walk = (node: AnyStateNode) => {
  nodes.push(node);
  Object.values(node.states).forEach(walk);
};
walk(machine.root);
const ids = new Set(nodes.map((node) => node.id));
const invoked = new Set(nodes.flatMap((node) => node.invoke.map((invoke) => invoke.id)));

describe('the chart names tests use', () => {
  it('are states of the chart', () => {
    expect(machine.id).toBe(MACHINE);
    const missing = Object.entries({ ...PREFIX, ...STATE })
      .filter(([, path]) => !ids.has(nodeId(path)))
      .map(([name, path]) => `${name}: no state ${path}`);
    expect(missing).toEqual([]);
  });

  it('name steps the chart invokes', () => {
    const missing = Object.entries(STEP)
      .filter(([, id]) => !invoked.has(id))
      .map(([name, id]) => `${name}: nothing is invoked as ${id}`);
    expect(missing).toEqual([]);
  });

  it('spell a path as the state value snapshot.matches takes', () => {
    expect(stateValue('starting')).toBe('starting');
    expect(stateValue(STATE.imdsRequesting)).toEqual({ provisioning: { work: { gathering: { imds: { fetching: 'requesting' } } } } });
  });
});
