/**
 * DOT for a {@link MachineGraph}: compound and parallel states as clusters (parallel regions dashed), an entry
 * dot per cluster as the initial pseudo-state and edge anchor, final states double-bordered, tags and invokes in
 * labels, error transitions dashed. With a highlight, the run's path is filled, coloured and numbered.
 */
import { encodeDomId } from './dom-id.js';
import type { GraphEdge, GraphNode, MachineGraph } from './graph.js';

export interface DotHighlight {
  /** State path → the journal steps at which it was active. */
  visited: Map<string, number[]>;
  /** Edge key → the journal steps that took it. */
  edges: Map<string, number[]>;
  /** State path → milliseconds active, shown beside the steps. */
  durations?: Map<string, number>;
  /** The state the run ended in and how it ended. */
  final?: { id: string; outcome: 'ok' | 'failed' };
}

const COLOR = {
  idle: '#8a8f98',
  visitedFill: '#dcefdc',
  visitedCluster: '#f1f8f1',
  taken: '#1a7f37',
  error: '#b42318',
  after: '#1f5fa8',
  ok: '#7fcf8a',
  failed: '#f4a3a3',
};

/** Quotes a DOT string, escaping what DOT would otherwise interpret. */
function q(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}

/** Compresses a step list for a label: `1, 3-5`. */
export function formatSteps(steps: number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < steps.length; i++) {
    let j = i;
    while (j + 1 < steps.length && steps[j + 1] === steps[j]! + 1) j++;
    parts.push(j > i + 1 ? `${steps[i]}-${steps[j]}` : j === i + 1 ? `${steps[i]}, ${steps[j]}` : `${steps[i]}`);
    i = j;
  }
  return parts.join(', ');
}

/** A duration for a label or a table: `850ms`, `12.3s`, `4m05s`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}

/** Whether `node` is `ancestor` or inside it. */
function within(graph: MachineGraph, node: string, ancestor: string): boolean {
  for (let at: string | undefined = node; at; at = graph.nodes.get(at)?.parent) if (at === ancestor) return true;
  return false;
}

const isCluster = (node: GraphNode): boolean => node.children.length > 0;
const anchor = (node: GraphNode): string => (isCluster(node) ? `${node.id}::entry` : node.id);

/** The label lines of a state: its name, tags, invokes, and when highlighted the steps it was active at. */
function labelOf(node: GraphNode, steps: number[] | undefined, parallelChild: boolean, ms?: number): string {
  const lines = [parallelChild ? `${node.key} (region)` : node.type === 'parallel' ? `${node.key} (parallel)` : node.key];
  if (node.tags.length) lines.push(`tags: ${node.tags.join(', ')}`);
  for (const invoke of node.invokes) lines.push(`invoke ${invoke}`);
  if (steps?.length) lines.push(`step ${formatSteps(steps)}${ms ? ` · ${formatDuration(ms)}` : ''}`);
  return lines.join('\n');
}

/** Renders a machine graph as Graphviz DOT, optionally highlighting one run's path. */
export function toDot(graph: MachineGraph, options: { highlight?: DotHighlight } = {}): string {
  const hl = options.highlight;
  const out: string[] = [
    `digraph ${q(graph.id)} {`,
    '  graph [compound=true, fontname="Helvetica", fontsize=11, nodesep=0.35, ranksep=0.45, newrank=true];',
    '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10, margin="0.12,0.05"];',
    `  edge [fontname="Helvetica", fontsize=9, color=${q(hl ? '#b8bcc4' : '#555b66')}, arrowsize=0.7];`,
  ];
  const emit = (node: GraphNode, depth: number): void => {
    const pad = '  '.repeat(depth);
    const steps = hl?.visited.get(node.id);
    const parent = node.parent ? graph.nodes.get(node.parent) : undefined;
    const region = parent?.type === 'parallel';
    const outcome = hl?.final?.id === node.id ? hl.final.outcome : undefined;
    if (isCluster(node)) {
      const style = region ? 'dashed,rounded,filled' : 'rounded,filled';
      out.push(`${pad}subgraph ${q(`cluster_${node.id}`)} {`);
      out.push(`${pad}  id=${q(encodeDomId('state', node.id))}; label=${q(labelOf(node, steps, region, hl?.durations?.get(node.id)))}; labeljust=l;`);
      out.push(`${pad}  style=${q(style)}; fillcolor=${q(steps ? COLOR.visitedCluster : '#fbfbfc')}; color=${q(steps ? COLOR.taken : '#9aa0aa')}; penwidth=${steps ? 1.6 : 1};`);
      const entryColor = node.type === 'parallel' ? '#9aa0aa' : '#222222';
      out.push(`${pad}  ${q(anchor(node))} [shape=point, width=0.09, label="", fillcolor=${q(entryColor)}, color=${q(entryColor)}];`);
      for (const child of node.children) emit(graph.nodes.get(child)!, depth + 1);
      if (node.initial) {
        const initial = graph.nodes.get(node.initial)!;
        const head = isCluster(initial) ? `, lhead=${q(`cluster_${initial.id}`)}` : '';
        out.push(`${pad}  ${q(anchor(node))} -> ${q(anchor(initial))} [color="#222222", arrowsize=0.6${head}];`);
      }
      out.push(`${pad}}`);
      return;
    }
    const attrs = [
      `id=${q(encodeDomId('state', node.id))}`,
      `label=${q(labelOf(node, steps, false, hl?.durations?.get(node.id)))}`,
    ];
    if (node.type === 'final') attrs.push('peripheries=2');
    if (outcome) attrs.push(`fillcolor=${q(COLOR[outcome])}`, 'penwidth=2.5', `color=${q(outcome === 'ok' ? COLOR.taken : COLOR.error)}`);
    else if (steps) attrs.push(`fillcolor=${q(COLOR.visitedFill)}`, 'penwidth=1.8', `color=${q(COLOR.taken)}`);
    else if (hl) attrs.push(`color=${q(COLOR.idle)}`, `fontcolor="#4a4f57"`);
    out.push(`${pad}${q(node.id)} [${attrs.join(', ')}];`);
  };
  emit(graph.nodes.get(graph.root)!, 1);
  graph.edges.forEach((edge) => out.push(...edgeLines(graph, edge, hl)));
  out.push('}');
  return `${out.join('\n')}\n`;
}

/** One DOT edge per target (a targetless transition loops on its source), styled by kind and highlight. */
function edgeLines(graph: MachineGraph, edge: GraphEdge, hl: DotHighlight | undefined): string[] {
  const source = graph.nodes.get(edge.source)!;
  const steps = hl?.edges.get(edge.key);
  const targets = edge.targets.length ? edge.targets : [edge.source];
  return targets.map((targetId, index) => {
    const target = graph.nodes.get(targetId)!;
    const attrs = [`id=${q(encodeDomId('edge', targets.length > 1 ? `${edge.key}#${index}` : edge.key))}`];
    attrs.push(`label=${q(steps ? `(${formatSteps(steps)}) ${edge.label}` : edge.label)}`);
    if (isCluster(source) && source !== target && !within(graph, target.id, source.id)) attrs.push(`ltail=${q(`cluster_${source.id}`)}`);
    if (isCluster(target) && source !== target && !within(graph, source.id, target.id)) attrs.push(`lhead=${q(`cluster_${target.id}`)}`);
    const styles: string[] = [];
    if (edge.kind === 'error') styles.push('dashed');
    if (!edge.targets.length) styles.push('dotted');
    if (styles.length) attrs.push(`style=${q(styles.join(','))}`);
    if (steps) attrs.push(`color=${q(COLOR.taken)}`, `fontcolor=${q(COLOR.taken)}`, 'penwidth=2.4');
    else if (!hl && edge.kind === 'error') attrs.push(`color=${q(COLOR.error)}`, `fontcolor=${q(COLOR.error)}`);
    else if (!hl && edge.kind === 'after') attrs.push(`color=${q(COLOR.after)}`, `fontcolor=${q(COLOR.after)}`);
    else if (hl) attrs.push(`fontcolor="#7a7f88"`);
    return `  ${q(anchor(source))} -> ${q(anchor(target))} [${attrs.join(', ')}];`;
  });
}
