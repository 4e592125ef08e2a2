/**
 * The statechart as plain data: a walk over `machine.root` that lists every state node and every transition
 * (events, `after` delays, invoke `onDone`/`onError`, state `onDone`, `always`) with a label a reader understands.
 * The renderers (dot.ts, mermaid.ts, svg.ts) and the trace work from this graph, never from XState internals;
 * they import it, and it imports none of them.
 */
import type { AnyStateMachine, AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { edgeKey, guardName, statePath } from './edge-key.js';

export interface GraphNode {
  /** The state's dotted path, e.g. `provisioning.work.metadata`. */
  id: string;
  key: string;
  type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  parent?: string;
  children: string[];
  initial?: string;
  tags: string[];
  /** Invoked actors as `id (src)`. */
  invokes: string[];
  /** The names of the state's own entry actions, in order (not the timers XState adds for `after`). */
  entry: string[];
  /**
   * A retry loop among the state's children, as the chart declares it in `meta.retry`: the attempt and the backoff
   * state (ids), the delay between attempts and the state's total deadline, if any.
   */
  retry?: { attempt: string; backoff: string; every: { name?: string; ms?: number }; deadline?: { name?: string; ms?: number } };
  /** In an overview: what a collapsed retry unit does, e.g. `retries every 2 s, gives up after 5 min`. */
  badge?: string;
  /** In an overview: the steps of a region drawn as one node, in order. */
  summary?: string[];
  /** In an overview: the failures that leave this state, in words, e.g. `error / timeout → reportingFailure`. */
  exits?: string;
}

export type EdgeKind = 'event' | 'after' | 'done' | 'error' | 'always';

export interface GraphEdge {
  /** The stable edge key, the same string journals record. */
  key: string;
  source: string;
  /** Empty for a targetless (internal) transition. */
  targets: string[];
  event: string;
  kind: EdgeKind;
  label: string;
  /** For an `after` edge: the delay's name and, when known, its value in ms. */
  delay?: { name?: string; ms?: number };
  /** In an overview: the keys of the full chart's edges this one edge stands for. */
  members?: string[];
}

export interface MachineGraph {
  id: string;
  root: string;
  nodes: Map<string, GraphNode>;
  edges: GraphEdge[];
  /** In an overview: what the drawing leaves out, said in words (e.g. `TERMINATE in any state → reportingFailure`). */
  notes?: string[];
}

/** Formats milliseconds the way a reader says them: `500ms`, `2s`, `1.5s`, `2min`. */
export function formatDelay(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000 || ms % 60_000 !== 0) return `${Number((ms / 1000).toFixed(3))}s`;
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : `${ms / 60_000}min`;
}

export interface GraphOptions {
  /**
   * Context to evaluate delay functions with (e.g. one built from the default config), so that a delay read from
   * config is labelled with its value; without it such delays show their name only.
   */
  delayContext?: unknown;
  /** Timer values a run recorded in its journal (delay name → ms); they win over `delayContext`. */
  timers?: Record<string, number>;
}

/** How XState calls a delay given as a function. */
type DelayFunction = (args: { context: unknown; event: { type: string } }, params: undefined) => unknown;

/** A named delay's value in ms: the run's recorded value, else the delay evaluated with the given context. */
function delayValue(name: string, implementation: unknown, options: GraphOptions): number | undefined {
  const recorded = options.timers?.[name];
  if (typeof recorded === 'number') return recorded;
  if (typeof implementation === 'number') return implementation;
  if (typeof implementation !== 'function' || options.delayContext === undefined) return undefined;
  try {
    const value = (implementation as DelayFunction)({ context: options.delayContext, event: { type: '' } }, undefined);
    return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A delay's name and value in ms, as far as they are known. */
function delayOf(machine: AnyStateMachine, delay: unknown, options: GraphOptions): { name?: string; ms?: number } {
  if (typeof delay === 'number') return { ms: delay };
  if (typeof delay !== 'string') return {};
  return { name: delay, ms: delayValue(delay, (machine.implementations.delays as Record<string, unknown>)[delay], options) };
}

/** Labels a delay by its value when known, else by its name: `after 2s`, `after (retryInterval)`. */
function delayLabel(delay: { name?: string; ms?: number }): string {
  if (delay.ms !== undefined) return `after ${formatDelay(delay.ms)}`;
  return delay.name ? `after (${delay.name})` : 'after (expression)';
}

/** The state's own entry actions by name, as its config lists them. */
function entryNames(node: AnyStateNode): string[] {
  const entry = (node.config as { entry?: unknown }).entry;
  const list = entry === undefined ? [] : Array.isArray(entry) ? entry : [entry];
  return list.map((action) => (typeof action === 'string' ? action : ((action as { type?: unknown })?.type as string | undefined) ?? 'inline action'));
}

/** The retry loop a state declares in `meta.retry` (delay names), with the delays' values as far as they are known. */
function retryOf(machine: AnyStateMachine, node: AnyStateNode, options: GraphOptions): Pick<GraphNode, 'retry'> {
  const retry = (node.meta as { retry?: { attempt?: unknown; backoff?: unknown; every?: unknown; deadline?: unknown } } | undefined)?.retry;
  const states = node.states as Record<string, AnyStateNode>;
  if (!retry || typeof retry.attempt !== 'string' || typeof retry.backoff !== 'string') return {};
  const [attempt, backoff] = [states[retry.attempt], states[retry.backoff]];
  if (!attempt || !backoff) throw new Error(`${statePath(node)}: meta.retry names ${retry.attempt} and ${retry.backoff}, which are not both its children`);
  const deadline = retry.deadline === undefined ? {} : { deadline: delayOf(machine, retry.deadline, options) };
  return { retry: { attempt: statePath(attempt), backoff: statePath(backoff), every: delayOf(machine, retry.every, options), ...deadline } };
}

/** Classifies a transition by its event type. */
function kindOf(eventType: string): EdgeKind {
  if (eventType === '') return 'always';
  if (eventType.startsWith('xstate.after.')) return 'after';
  if (eventType.startsWith('xstate.error.')) return 'error';
  if (eventType.startsWith('xstate.done.')) return 'done';
  return 'event';
}

/** A short human label for a transition, with its guard in brackets. */
function edgeLabel(transition: AnyTransitionDefinition, delay: { name?: string; ms?: number } | undefined): string {
  const eventType = String(transition.eventType);
  let label: string;
  const kind = kindOf(eventType);
  if (kind === 'always') label = 'always';
  else if (kind === 'after') label = delayLabel(delay ?? {});
  else if (eventType.startsWith('xstate.done.actor.')) label = `done: ${eventType.slice('xstate.done.actor.'.length)}`;
  else if (eventType.startsWith('xstate.error.actor.')) label = `error: ${eventType.slice('xstate.error.actor.'.length)}`;
  else if (eventType.startsWith('xstate.done.state.')) label = 'onDone';
  else label = eventType;
  const guard = guardName(transition);
  return guard ? `${label} [${guard}]` : label;
}

/** The name of an invoked actor's logic: its key in `setup({ actors })`, or `inline`. */
function srcName(src: unknown): string {
  return typeof src === 'string' ? src : 'inline';
}

/** Walks a machine into a {@link MachineGraph}; works for any XState 5 machine. */
export function buildGraph(machine: AnyStateMachine, options: GraphOptions = {}): MachineGraph {
  const nodes = new Map<string, GraphNode>();
  const edges: GraphEdge[] = [];
  const visit = (node: AnyStateNode): void => {
    const id = statePath(node);
    const children = Object.values(node.states as Record<string, AnyStateNode>);
    const initialTarget = node.type === 'compound' ? node.initial?.target?.[0] : undefined;
    nodes.set(id, {
      id,
      key: node.key,
      type: node.type,
      parent: node.parent ? statePath(node.parent) : undefined,
      children: children.map(statePath),
      initial: initialTarget ? statePath(initialTarget) : undefined,
      tags: [...node.tags],
      invokes: node.invoke.map((invoke) => `${invoke.id} (${srcName(invoke.src)})`),
      entry: entryNames(node),
      ...retryOf(machine, node, options),
    });
    const transitions: AnyTransitionDefinition[] = [...node.transitions.values()].flat();
    transitions.push(...(node.always ?? []));
    for (const transition of transitions) {
      const eventType = String(transition.eventType);
      const delayed = kindOf(eventType) === 'after' ? node.after.find((candidate) => candidate.eventType === eventType) : undefined;
      const delay = delayed ? delayOf(machine, delayed.delay, options) : undefined;
      edges.push({
        key: edgeKey(node, transition),
        source: id,
        targets: (transition.target ?? []).map(statePath),
        event: String(transition.eventType),
        kind: kindOf(String(transition.eventType)),
        label: edgeLabel(transition, delay),
        ...(delay ? { delay } : {}),
      });
    }
    children.forEach(visit);
  };
  visit(machine.root);
  return { id: machine.id, root: statePath(machine.root), nodes, edges };
}
