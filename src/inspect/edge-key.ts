/**
 * Stable names for states and transitions, shared by the journal, the chart renderers and the trace so that a
 * journal line, a DOT edge and a test assertion all spell the same edge the same way.
 */
import type { AnyStateNode, AnyTransitionDefinition } from 'xstate';

/** The dotted path of a state node from the machine root, e.g. `provisioning.work.fetchingMetadata`. */
export function statePath(node: AnyStateNode): string {
  return [node.machine.root.key, ...node.path].join('.');
}

/** A guard's name, or `guard` for an inline function, so edge keys never depend on source text. */
export function guardName(transition: AnyTransitionDefinition): string | undefined {
  const guard = transition.guard as unknown;
  if (guard === undefined) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') return guard.name && guard.name !== 'guard' ? guard.name : 'guard';
  if (guard && typeof guard === 'object' && typeof (guard as { type?: unknown }).type === 'string') {
    return (guard as { type: string }).type;
  }
  return 'guard';
}

/**
 * The stable key of a transition, e.g. `provisioning.a.requesting -> provisioning.a.backoff on
 * xstate.error.actor.imds [canRetry]`; eventless transitions read `on (always)`, targetless ones `-> (internal)`.
 */
export function edgeKey(sourceNode: AnyStateNode, transition: AnyTransitionDefinition): string {
  const targets = transition.target?.length ? transition.target.map(statePath).join(', ') : '(internal)';
  const event = transition.eventType === '' ? '(always)' : String(transition.eventType);
  const guard = guardName(transition);
  return `${statePath(sourceNode)} -> ${targets} on ${event}${guard ? ` [${guard}]` : ''}`;
}
