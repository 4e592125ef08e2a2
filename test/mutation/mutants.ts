/**
 * Single-transition mutants of an XState chart, enumerated from whatever the chart contains: for every transition
 * definition of every state node, retarget it to another state (a sibling of its target, or of its source), negate
 * or drop its guard, or drop one of its actions; and for every entry action of every state, drop it or move it to
 * a neighbouring state (one a transition leads to from it, or from which one leads to it). Each mutant is a new machine built from a copy of the config with
 * the original implementations; the chart's own file is never touched.
 */
import { createMachine, not, type AnyStateMachine, type AnyStateNode, type AnyTransitionDefinition } from 'xstate';

export type MutantKind = 'retarget' | 'guard negated' | 'guard dropped' | 'action dropped' | 'entry dropped' | 'entry moved';

/** Kinds that change a state's entry actions rather than a transition. */
export const ENTRY_KINDS: ReadonlySet<MutantKind> = new Set(['entry dropped', 'entry moved']);

export interface Mutant {
  /** Stable name: `<source id> <event>[<index>] <kind> <detail>`. */
  id: string;
  kind: MutantKind;
  /** The transition it changes, `<source id> <event>[<index>]`, or `<state id> entry` for an entry mutant. */
  edge: string;
  /** What the mutant does, in words. */
  meaning: string;
  /** For a retarget: the state the transition led to, and the one it leads to now. */
  retarget?: { from: AnyStateNode | undefined; to: AnyStateNode };
  build(): AnyStateMachine;
}

const allNodes = (node: AnyStateNode): AnyStateNode[] => [node, ...Object.values(node.states).flatMap((c) => allNodes(c as AnyStateNode))];

/** `xstate.done.actor.vmId` → `done vmId`, for readable names. */
export function shortEventType(type: string, source: AnyStateNode): string {
  if (type === '') return 'always';
  if (type.startsWith('xstate.done.actor.')) return `done ${type.slice(18)}`;
  if (type.startsWith('xstate.error.actor.')) return `error ${type.slice(19)}`;
  if (type.startsWith('xstate.after.')) return `after ${type.slice(13, type.length - source.id.length - 1)}`;
  if (type.startsWith('xstate.done.state.')) return 'regions done';
  return type;
}

/** Copies plain objects and arrays; functions and class instances are shared. */
function copy<T>(value: T): T {
  if (Array.isArray(value)) return value.map(copy) as T;
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v)])) as T;
  }
  return value;
}

type TransitionConfig = Record<string, unknown>;
const asList = (v: unknown): TransitionConfig[] =>
  v === undefined ? [] : (Array.isArray(v) ? v : [v]).map((t) => (typeof t === 'string' ? { target: t } : (t as TransitionConfig)));
const actionList = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** The config slot holding the transitions of `type` on `node`: the owning object and its key. */
function slotOf(nodeConfig: Record<string, any>, node: AnyStateNode, type: string): { owner: Record<string, any>; key: string } {
  if (type === '') return { owner: nodeConfig, key: 'always' };
  if (type.startsWith('xstate.done.actor.') || type.startsWith('xstate.error.actor.')) {
    const done = type.startsWith('xstate.done.actor.');
    const id = type.slice(done ? 18 : 19);
    const invokes = Array.isArray(nodeConfig.invoke) ? nodeConfig.invoke : [nodeConfig.invoke];
    const owner = invokes.find((inv: { id?: string }) => inv?.id === id);
    if (!owner) throw new Error(`invoke '${id}' of ${node.id} has no id in the config`);
    return { owner, key: done ? 'onDone' : 'onError' };
  }
  if (type.startsWith('xstate.after.')) return { owner: nodeConfig.after, key: type.slice(13, type.length - node.id.length - 1) };
  if (type.startsWith('xstate.done.state.')) return { owner: nodeConfig, key: 'onDone' };
  return { owner: nodeConfig.on, key: type };
}

function configAt(root: Record<string, any>, path: string[]): Record<string, any> {
  let config = root;
  for (const key of path) config = config.states[key];
  return config;
}

/**
 * Other states a transition could wrongly lead to: siblings of its target and of its source; where there are none
 * (a retry loop between two states), the siblings of the source's parent.
 */
function retargets(t: AnyTransitionDefinition): AnyStateNode[] {
  const source = t.source as AnyStateNode;
  const current = (t.target ?? []) as AnyStateNode[];
  if (current.length > 1) return [];
  const siblings = (n: AnyStateNode | undefined) => (n?.parent ? (Object.values(n.parent.states) as AnyStateNode[]) : []);
  const seen = new Set<string>();
  const fresh = (pool: AnyStateNode[]) => pool.filter((n) => n !== current[0] && n !== source && !seen.has(n.id) && seen.add(n.id));
  const near = fresh([...siblings(current[0]), ...siblings(source)]);
  return near.length ? near : fresh(siblings(source.parent));
}

const describeTarget = (t: AnyTransitionDefinition) => ((t.target ?? []) as AnyStateNode[]).map((n) => n.id).join(',') || 'no target';
const describeGuard = (g: unknown) => (typeof g === 'string' ? g : (g as { type?: string })?.type ?? 'inline guard');
function describeAction(a: unknown): string {
  if (typeof a === 'string') return a;
  const fn = a as { type?: string; assignment?: unknown };
  if (fn?.type === 'xstate.assign' && fn.assignment && typeof fn.assignment === 'object') return `assign(${Object.keys(fn.assignment).join(', ')})`;
  return fn?.type ?? 'inline action';
}

/** Every single-transition mutant of `machine`. */
export function mutantsOf(machine: AnyStateMachine): Mutant[] {
  const mutants: Mutant[] = [];
  const rootConfig = machine.config as Record<string, any>;
  for (const node of allNodes(machine.root)) {
    const groups: Array<[string, AnyTransitionDefinition[]]> = [...node.transitions.entries()];
    if (node.always?.length) groups.push(['', node.always]);
    for (const [type, defs] of groups) {
      defs.forEach((t, index) => {
        const edge = `${node.id} ${shortEventType(type, node)}[${index}]`;
        const original = asList(slotOf(configAt(rootConfig, node.path), node, type).owner[slotOf(configAt(rootConfig, node.path), node, type).key])[index];
        if (!original) throw new Error(`no config for transition ${edge}`);
        const variant = (
          kind: MutantKind,
          detail: string,
          meaning: string,
          change: (t: TransitionConfig) => TransitionConfig,
          retarget?: Mutant['retarget'],
        ) =>
          mutants.push({
            id: `${edge} ${kind}${detail ? ` ${detail}` : ''}`,
            kind,
            edge,
            meaning: `${edge}: ${meaning}`,
            ...(retarget ? { retarget } : {}),
            build: () => {
              const config = copy(rootConfig);
              const { owner, key } = slotOf(configAt(config, node.path), node, type);
              const list = asList(owner[key]);
              list[index] = change({ ...list[index]! });
              owner[key] = list;
              return createMachine(config as never, machine.implementations as never) as unknown as AnyStateMachine;
            },
          });
        for (const to of retargets(t)) {
          variant('retarget', `→ ${to.id}`, `goes to ${to.id} instead of ${describeTarget(t)}`, (c) => ({ ...c, target: `#${to.id}` }), {
            from: (t.target as AnyStateNode[] | undefined)?.[0],
            to,
          });
        }
        if (original.guard !== undefined) {
          const guard = describeGuard(original.guard);
          variant('guard negated', guard, `taken when ${guard} is false instead of true`, (c) => ({ ...c, guard: not(c.guard as never) }));
          variant('guard dropped', guard, `taken whether or not ${guard} holds`, (c) => {
            const { guard: _dropped, ...rest } = c;
            return rest;
          });
        }
        actionList(original.actions).forEach((action, j) => {
          const name = describeAction(action);
          variant('action dropped', `#${j} ${name}`, `no longer runs ${name}`, (c) => ({ ...c, actions: actionList(c.actions).filter((_, k) => k !== j) }));
        });
      });
    }
  }
  mutants.push(...entryMutants(machine, rootConfig));
  return mutants;
}

/** Every state a transition of `node` leads to, and every state with a transition leading to `node`. */
function neighbours(machine: AnyStateMachine, node: AnyStateNode): AnyStateNode[] {
  const transitionsOf = (n: AnyStateNode) => [...[...n.transitions.values()].flat(), ...(n.always ?? [])];
  const found = new Map<string, AnyStateNode>();
  for (const t of transitionsOf(node)) for (const to of (t.target ?? []) as AnyStateNode[]) found.set(to.id, to);
  for (const other of allNodes(machine.root)) {
    if (transitionsOf(other).some((t) => ((t.target ?? []) as AnyStateNode[]).includes(node))) found.set(other.id, other);
  }
  found.delete(node.id);
  found.delete(machine.root.id);
  return [...found.values()];
}

/** Each entry action of each state dropped, or moved to a neighbouring state. */
function entryMutants(machine: AnyStateMachine, rootConfig: Record<string, any>): Mutant[] {
  const mutants: Mutant[] = [];
  for (const node of allNodes(machine.root)) {
    const entries = actionList(configAt(rootConfig, node.path).entry);
    entries.forEach((action, j) => {
      const name = describeAction(action);
      const edge = `${node.id} entry`;
      const build = (to?: AnyStateNode) => () => {
        const config = copy(rootConfig);
        const own = configAt(config, node.path);
        own.entry = actionList(own.entry).filter((_, k) => k !== j);
        if (to) {
          const there = configAt(config, to.path);
          there.entry = [...actionList(there.entry), action];
        }
        return createMachine(config as never, machine.implementations as never) as unknown as AnyStateMachine;
      };
      mutants.push({ id: `${edge} #${j} ${name} entry dropped`, kind: 'entry dropped', edge, meaning: `${edge}: no longer runs ${name} on entry`, build: build() });
      for (const to of neighbours(machine, node)) {
        mutants.push({
          id: `${edge} #${j} ${name} entry moved → ${to.id}`,
          kind: 'entry moved',
          edge,
          meaning: `${edge}: runs ${name} on entering ${to.id} instead`,
          build: build(to),
        });
      }
    });
  }
  return mutants;
}
