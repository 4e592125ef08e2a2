/**
 * The overview of a chart: every retry loop the chart declares (`meta.retry`: an attempt state and a backoff state
 * whose timer leads back to it) drawn as one unit with a badge, "retries every 2 s, gives up after 5 min", and the many ways out of one
 * top-level block into the same state merged into one edge. The full chart keeps every state; the overview is
 * what fits in a README and on a screen at a glance.
 */
import type { GraphEdge, GraphNode, MachineGraph } from './graph.js';
import { guardWords, spokenDelay } from './words.js';

export { spokenDelay };

export interface Overview {
  graph: MachineGraph;
  /** Every state of the full chart → the node that shows it in the overview. */
  alias: Map<string, string>;
}

/** The badge of a retry unit. */
function badgeOf(every: number | undefined, deadline: number | undefined): string {
  const retries = every === undefined ? 'retries' : `retries every ${spokenDelay(every)}`;
  return deadline === undefined ? retries : `${retries}, gives up after ${spokenDelay(deadline)}`;
}

/** An edge label for the overview: nothing for the plain way forward, else the guard in words, `error` or the timer. */
function shortLabel(edge: GraphEdge): string {
  const guardName = /\[([^\]]+)\]$/.exec(edge.label)?.[1];
  const guard = guardName && guardWords(guardName);
  // A guarded eventless edge is its guard alone, as a guarded done edge is: `always` would only widen the page.
  const eventless = edge.label.startsWith('always') && guard;
  const base = edge.kind === 'done' || eventless ? '' : edge.kind === 'error' ? 'error' : edge.kind === 'after' ? edge.label.replace(/^after (\d)/, 'after $1') : edge.label.replace(/ \[[^\]]+\]$/, '');
  return [base, guard ? `[${guard}]` : ''].filter(Boolean).join(' ');
}

/** The top-level state (a child of the root) that contains `id`, or `id` itself. */
function topLevel(graph: MachineGraph, id: string): string {
  let at = id;
  while (graph.nodes.get(at)?.parent && graph.nodes.get(at)!.parent !== graph.root) at = graph.nodes.get(at)!.parent!;
  return at;
}

/**
 * A region of a parallel state, or any other inner state, whose states are all simple (after retry units are
 * collapsed) becomes one node that lists its steps in order, so the parallel work reads as columns side by side.
 * A step that is itself a parallel state of such regions is listed as one line (`→ password ∥ sshKeys`). Repeated
 * until nothing changes, so nested blocks fold from the inside out.
 */
function collapseRegions(nodes: Map<string, GraphNode>, alias: Map<string, string>, hidden: Set<string>, root: string): void {
  const isLeaf = (node: GraphNode) => node.children.length === 0;
  const isParallelOfLeaves = (node: GraphNode) =>
    node.type === 'parallel' && node.children.every((id) => isLeaf(nodes.get(id)!));
  for (let changed = true; changed; ) {
    changed = false;
    for (const region of [...nodes.values()]) {
      if (region.id === root || region.parent === root && region.type === 'parallel') continue;
      if (hidden.has(region.id) || !region.children.length) continue;
      const children = region.children.map((id) => nodes.get(id)!);
      // The blocks right under the top level keep their parallel parts drawn side by side; deeper ones may fold them.
      const topBlock = nodes.get(region.parent ?? '')?.parent === root;
      if (!children.every((child) => isLeaf(child) || (!topBlock && isParallelOfLeaves(child)))) continue;
      // A parallel state stays drawn as its regions side by side.
      if (region.type === 'parallel') continue;
      const steps = children
        .filter((child) => child.type !== 'final')
        .flatMap((child) =>
          isLeaf(child)
            ? [`→ ${child.key}`, ...(child.badge ? `⟳ ${child.badge}`.split(', ') : [])]
            : [`→ ${child.children.map((id) => nodes.get(id)!.key).join(' ∥ ')}`],
        );
      nodes.set(region.id, { ...region, children: [], initial: undefined, badge: undefined, summary: steps });
      const folded = children.flatMap((child) => [child.id, ...child.children]);
      for (const id of folded) {
        hidden.add(id);
        for (const [from, to] of alias) if (to === id) alias.set(from, region.id);
      }
      changed = true;
    }
  }
}

/**
 * The chart's ends that report nothing and that one state routes to (the first state: already provisioned, not an
 * Azure VM, another agent running) become one node that names each end with the guard that leads there, so the
 * overview shows every way a run ends without a row of small boxes across its top.
 */
function mergeQuietEnds(graph: MachineGraph, nodes: Map<string, GraphNode>, alias: Map<string, string>, hidden: Set<string>): Set<string> {
  const merged = new Set<string>();
  const root = nodes.get(graph.root)!;
  const bySource = new Map<string, { node: GraphNode; guard: string }[]>();
  for (const id of root.children) {
    const node = nodes.get(id)!;
    if (node.type !== 'final' || node.tags.length) continue;
    const into = graph.edges.filter((edge) => edge.targets.includes(id));
    const sources = new Set(into.map((edge) => alias.get(edge.source)));
    if (sources.size !== 1 || into.length !== 1) continue;
    const guardName = /\[([^\]]+)\]$/.exec(into[0]!.label)?.[1];
    const source = [...sources][0]!;
    bySource.set(source, [...(bySource.get(source) ?? []), { node, guard: (guardName && guardWords(guardName)) || into[0]!.label }]);
  }
  for (const ends of bySource.values()) {
    const entry = ends[0]!.node.entry.join(',');
    if (ends.length < 2 || ends.some((end) => end.node.entry.join(',') !== entry)) continue;
    const [first, ...rest] = ends;
    const summary = ends.map((end) => `[${end.guard}] → ${end.node.key}`);
    nodes.set(first!.node.id, { ...first!.node, key: 'ends at once', summary });
    for (const end of rest) {
      hidden.add(end.node.id);
      alias.set(end.node.id, first!.node.id);
    }
    root.children = root.children.filter((id) => !rest.some((end) => end.node.id === id));
    merged.add(first!.node.id);
  }
  return merged;
}

/**
 * Each retry loop the chart declares (`meta.retry`) becomes one box with a badge: the state that holds it when the
 * loop is all it holds, else the attempt state, with the backoff hidden.
 */
function badgeRetryLoops(graph: MachineGraph, nodes: Map<string, GraphNode>, alias: Map<string, string>, hidden: Set<string>): void {
  for (const holder of graph.nodes.values()) {
    if (!holder.retry) continue;
    const { attempt, backoff, every, deadline } = holder.retry;
    const whole = holder.children.length === 2 && holder.id !== graph.root;
    const shown = whole ? holder.id : attempt;
    const node = nodes.get(shown)!;
    const badge = badgeOf(every.ms, whole ? deadline?.ms : undefined);
    nodes.set(shown, { ...node, badge, invokes: nodes.get(attempt)!.invokes, ...(whole ? { children: [], initial: undefined } : {}) });
    for (const id of whole ? [attempt, backoff] : [backoff]) {
      alias.set(id, shown);
      hidden.add(id);
    }
    if (!whole) nodes.get(holder.id)!.children = nodes.get(holder.id)!.children.filter((child) => child !== backoff);
  }
}

/**
 * The overview's edges between the states it shows (`alias` names where each state is drawn): the ways into merged
 * quiet ends as one edge, edges leaving a top-level block merged per target, and the root's own transitions as notes.
 */
function overviewEdges(graph: MachineGraph, alias: Map<string, string>, quietEnds: Set<string>): { edges: GraphEdge[]; notes: string[] } {
  const edges: GraphEdge[] = [];
  const merged = new Map<string, GraphEdge>();
  const notes: string[] = [];
  const quiet = new Map<string, GraphEdge>();
  for (const edge of graph.edges) {
    const source = alias.get(edge.source)!;
    const targets = edge.targets.map((target) => alias.get(target)!);
    if (targets.every((target) => target === source)) continue;
    // The ways into merged quiet ends are one edge; the node lists which guard leads to which end.
    if (targets.length === 1 && quietEnds.has(targets[0]!)) {
      const key = `${source} -> ${targets[0]}`;
      if (quiet.has(key)) {
        quiet.get(key)!.members!.push(edge.key);
        continue;
      }
      const first: GraphEdge = { ...edge, source, targets, label: edge.label.replace(/ \[[^\]]+\]$/, ''), members: [edge.key] };
      quiet.set(key, first);
      edges.push(first);
      continue;
    }
    if (edge.source === graph.root) {
      // States that handle the event themselves are drawn with their own edge: the note is for the others.
      const elsewhere = graph.edges.some((other) => other.source !== graph.root && other.label.split(' ')[0] === edge.label);
      notes.push(`${edge.label} in any${elsewhere ? ' other' : ''} state → ${graph.nodes.get(targets[0] ?? '')?.key ?? 'stays'}`);
      continue;
    }
    const block = topLevel(graph, edge.source);
    const leaves = block !== edge.source && targets.length === 1 && topLevel(graph, targets[0]!) !== block && edge.kind !== 'done';
    if (!leaves) {
      edges.push({ ...edge, source, targets, label: shortLabel(edge) });
      continue;
    }
    const word = edge.kind === 'after' ? 'timeout' : edge.kind === 'error' ? 'error' : edge.label;
    const key = `${block} -> ${targets[0]}`;
    const existing = merged.get(key);
    if (existing) {
      if (!existing.label.split(' / ').includes(word)) existing.label += ` / ${word}`;
      existing.members!.push(edge.key);
      continue;
    }
    const first: GraphEdge = { ...edge, source: block, targets, label: word, kind: edge.kind, members: [edge.key] };
    merged.set(key, first);
    edges.push(first);
  }
  return { edges, notes };
}

/** Builds the overview of a chart. */
export function overviewOf(graph: MachineGraph): Overview {
  const nodes = new Map<string, GraphNode>([...graph.nodes].map(([id, node]) => [id, { ...node, children: [...node.children] }]));
  const alias = new Map<string, string>([...graph.nodes.keys()].map((id) => [id, id]));
  const hidden = new Set<string>();
  badgeRetryLoops(graph, nodes, alias, hidden);
  collapseRegions(nodes, alias, hidden, graph.root);
  const quietEnds = mergeQuietEnds(graph, nodes, alias, hidden);
  for (const id of hidden) nodes.delete(id);
  for (const [id, node] of nodes) nodes.set(id, { ...node, invokes: [] });
  const { edges, notes } = overviewEdges(graph, alias, quietEnds);
  return { graph: { ...graph, nodes, edges: foldFailureEdges(nodes, edges), notes }, alias };
}

/**
 * Errors, timeouts and conditions that lead to the one state most of them lead to (reportingFailure) become a line in
 * their source's label instead of an edge across the whole chart; the full chart draws every one of them.
 */
function foldFailureEdges(nodes: Map<string, GraphNode>, edges: GraphEdge[]): GraphEdge[] {
  const failing = (edge: GraphEdge) => edge.kind === 'error' || edge.kind === 'after';
  const counts = new Map<string, number>();
  for (const edge of edges) {
    if ((failing(edge) || /\[/.test(edge.label)) && edge.targets.length === 1) counts.set(edge.targets[0]!, (counts.get(edge.targets[0]!) ?? 0) + 1);
  }
  const [sink, count] = [...counts].sort((a, b) => b[1] - a[1])[0] ?? [];
  if (!sink || count! < 3) return edges;
  const sinkKey = nodes.get(sink)!.key;
  return edges.filter((edge) => {
    if (edge.targets[0] !== sink || edge.source === sink || (!failing(edge) && !/\[/.test(edge.label))) return true;
    const node = nodes.get(edge.source)!;
    const word = edge.label.replace(/^after .*/, 'timeout').replace(/^(?:always )?\[(.*)\]$/, '$1');
    nodes.set(edge.source, { ...node, exits: node.exits ? `${node.exits.replace(` → ${sinkKey}`, '')} / ${word} → ${sinkKey}` : `${word} → ${sinkKey}` });
    return false;
  });
}
