/**
 * What the fleet view's readers (journals, OTLP file exports) need of the provisioning chart, worked out once: the
 * states whose entry tells systemd READY=1, and the leaf states that are steps (they run an actor, or wait between a
 * retry's attempts), both read from the chart itself so a new state needs no list kept here.
 */
import type { AnyStateMachine } from 'xstate';
import { buildGraph, type MachineGraph } from './graph.js';

/** What the reader needs of the chart, worked out once for every journal. */
export interface FleetChart {
  graph: MachineGraph;
  /** States whose entry tells systemd READY=1. */
  readyStates: Set<string>;
  /** Leaf states that do a step (invoke an actor) or wait between a retry's attempts: the ones timed. */
  steps: Set<string>;
}

/** The chart's facts the fleet view reads runs by. */
export function fleetChart(machine: AnyStateMachine): FleetChart {
  const graph = buildGraph(machine);
  const backoffs = new Set([...graph.nodes.values()].flatMap((node) => (node.retry ? [node.retry.backoff] : [])));
  const readyStates = new Set<string>();
  const steps = new Set<string>();
  for (const node of graph.nodes.values()) {
    if (node.entry.includes('tellSystemdReady')) readyStates.add(node.id);
    if (node.children.length === 0 && node.type !== 'final' && (node.invokes.length > 0 || backoffs.has(node.id))) steps.add(node.id);
  }
  return { graph, readyStates, steps };
}

/** The provisioning chart's facts, loaded on demand. */
export async function provisioningChart(): Promise<FleetChart> {
  const { provisioningMachine } = await import('../../machines/provisioning-machine.js');
  return fleetChart(provisioningMachine);
}

/** Whether `state` is a READY=1 state or inside one. */
export function inReadyState(chart: FleetChart, state: string): boolean {
  for (let at: string | undefined = state; at; at = chart.graph.nodes.get(at)?.parent) if (chart.readyStates.has(at)) return true;
  return false;
}
