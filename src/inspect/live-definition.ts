/**
 * The machine definition the Stately inspector draws, rebuilt from state nodes field by field: keys, types,
 * initial states, tags, invoke ids and logic names, transition targets and guard names. Never the machine's
 * `config`, which holds the initial context and inline functions.
 */
import type { AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { guardName } from './edge-key.js';

interface TransitionJson {
  target?: string[];
  guard?: string;
}

/** One transition as the inspector understands it: targets as `#id` references. */
function transitionJson(transition: AnyTransitionDefinition): TransitionJson {
  const json: TransitionJson = {};
  if (transition.target?.length) json.target = transition.target.map((node: AnyStateNode) => `#${node.id}`);
  const guard = guardName(transition);
  if (guard) json.guard = guard;
  return json;
}

/** The allow-listed definition of a state node and its descendants. */
export function definitionOf(node: AnyStateNode): Record<string, unknown> {
  const json: Record<string, unknown> = { id: node.id, key: node.key, type: node.type };
  if (node.type === 'compound' && node.initial?.target?.[0]) json.initial = node.initial.target[0].key;
  if (node.tags.length) json.tags = [...node.tags];
  if (node.invoke.length) {
    json.invoke = node.invoke.map((invoke) => ({ id: invoke.id, src: typeof invoke.src === 'string' ? invoke.src : 'inline' }));
  }
  const on: Record<string, TransitionJson[]> = {};
  for (const [eventType, transitions] of node.transitions) on[eventType] = transitions.map(transitionJson);
  if (Object.keys(on).length) json.on = on;
  if (node.always?.length) json.always = node.always.map(transitionJson);
  const children = Object.values(node.states as Record<string, AnyStateNode>);
  if (children.length) json.states = Object.fromEntries(children.map((child) => [child.key, definitionOf(child)]));
  return json;
}
