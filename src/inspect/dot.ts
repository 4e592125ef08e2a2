/**
 * DOT for a {@link MachineGraph}, laid out top to bottom the way the agent runs: a start dot at the top,
 * compound and parallel states as clusters (parallel regions dashed, side by side), the machine's own final
 * states on the bottom rank. Health tags are fill colours explained by a legend; error transitions are red and
 * dashed, timers blue. With a highlight, the run's path is drawn bold and numbered and the rest fades.
 */
import { encodeDomId } from './dom-id.js';
import type { GraphEdge, GraphNode, MachineGraph } from './graph.js';

/** Entry actions a reader of the chart must see in the state that runs them, in every drawing of it. */
const ENTRY_WORDS: Record<string, string> = {
  tellSystemdReady: 'on entry: READY=1 to systemd',
};

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

export interface DotOptions {
  highlight?: DotHighlight;
  /** Draw the legend of colours and line styles (default true). */
  legend?: boolean;
  /** Larger type and tighter spacing, for an overview read at README width. */
  compact?: boolean;
}

const COLOR = {
  line: '#555b66',
  faded: '#b8bcc4',
  fadedText: '#6a707a',
  taken: '#1a7f37',
  error: '#b42318',
  after: '#1f5fa8',
  ok: '#7fcf8a',
  failed: '#f4a3a3',
};

/** Fill colours of the health tags (Azure's health states), one hue each, and lighter tints for clusters. */
const HEALTH: Array<{ tag: RegExp; name: string; fill: string; cluster: string }> = [
  { tag: /Failed$/, name: 'NotReady/ProvisioningFailed', fill: '#fde2e1', cluster: '#fff5f4' },
  { tag: /^Ready$/, name: 'Ready', fill: '#d8f3dc', cluster: '#f2fbf3' },
  { tag: /Provisioning$|NotReady/, name: 'NotReady/Provisioning', fill: '#fff1c9', cluster: '#fffaeb' },
];

/** Quotes a DOT string, escaping what DOT would otherwise interpret. */
function q(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}

/** Quotes a multi-line label whose lines are left-justified (`\l` ends each line). */
function qLeft(text: string): string {
  return `"${text.split('\n').map((line) => `${q(line).slice(1, -1)}\\l`).join('')}"`;
}

/** Escapes text for a Graphviz HTML-like label. */
function h(text: string): string {
  return text.replace(/[&<>"]/g, (char) => `&#${char.charCodeAt(0)};`);
}

/** How many runs of steps a label lists before it shortens the middle: a long run's retries, not 100 000 numbers. */
const MAX_STEP_PARTS = 12;

/**
 * Compresses a step list for a label: `1, 3-5`; beyond MAX_STEP_PARTS runs, the first and last few and the count
 * (`1, 3, 5, 7, 9, 11, … 95, 97, 99 (50 steps)`). The page's `data-step` attributes still list every step.
 */
export function formatSteps(steps: number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < steps.length; i++) {
    let j = i;
    while (j + 1 < steps.length && steps[j + 1] === steps[j]! + 1) j++;
    parts.push(j > i + 1 ? `${steps[i]}-${steps[j]}` : j === i + 1 ? `${steps[i]}, ${steps[j]}` : `${steps[i]}`);
    i = j;
  }
  if (parts.length <= MAX_STEP_PARTS) return parts.join(', ');
  const keep = MAX_STEP_PARTS / 2;
  return `${parts.slice(0, keep).join(', ')}, … ${parts.slice(-keep + 1).join(', ')} (${steps.length} steps)`;
}

/** A duration for a label or a table: `850ms`, `12.3s`, `4m05s`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return '?';
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

/** The health entry of a state's own tags, or of its nearest tagged ancestor when `inherit`. */
function healthOf(graph: MachineGraph, node: GraphNode, inherit: boolean): (typeof HEALTH)[number] | undefined {
  for (let at: GraphNode | undefined = node; at; at = inherit && at.parent ? graph.nodes.get(at.parent) : undefined) {
    const entry = HEALTH.find((health) => at!.tags.some((tag) => health.tag.test(tag)));
    if (entry) return entry;
  }
  return undefined;
}

const isCluster = (node: GraphNode): boolean => node.children.length > 0;
const anchor = (node: GraphNode): string => (isCluster(node) ? `${node.id}::entry` : node.id);
/** Where edges leave a cluster: an invisible point held below all its children, so the flow keeps going down. */
const exit = (node: GraphNode): string => (isCluster(node) ? `${node.id}::exit` : node.id);

/**
 * The label lines of a state: its name, what it invokes, its retry badge, and when highlighted its steps. A region
 * is named so (`(region)`) unless its dashed border alone says it, as in the compact overview, whose legend does.
 */
function labelOf(node: GraphNode, steps: number[] | undefined, region: boolean, ms?: number): string {
  const lines = [region ? `${node.key} (region)` : node.type === 'parallel' ? `${node.key} (parallel)` : node.key];
  for (const invoke of node.invokes) lines.push(`invoke ${invoke}`);
  if (node.badge) lines.push(...`⟳ ${node.badge}`.split(', '));
  lines.push(...(node.summary ?? []));
  if (node.exits) lines.push(...wrapExits(`✕ ${node.exits}`));
  for (const action of node.entry ?? []) if (ENTRY_WORDS[action]) lines.push(ENTRY_WORDS[action]);
  if (steps?.length) lines.push(`step ${formatSteps(steps)}${ms ? ` · ${formatDuration(ms)}` : ''}`);
  return lines.join('\n');
}

/** Longest line of a state's ways out before it wraps: wider, a block's label widens the whole page. */
const EXITS_WIDTH = 40;

/**
 * `✕ a / b / c → target` over as many lines as keep each within EXITS_WIDTH characters, broken after a ` /`. The
 * lines after the first are not indented: Graphviz writes leading spaces as no-break spaces, which the chart's own
 * font does not carry.
 */
function wrapExits(text: string): string[] {
  const lines: string[] = [];
  let line = '';
  for (const part of text.split(' / ')) {
    if (line && line.length + part.length + 3 > EXITS_WIDTH) {
      lines.push(`${line} /`);
      line = part;
    } else line = line ? `${line} / ${part}` : part;
  }
  return [...lines, line];
}

/**
 * The legend: the health colours and what the line and border styles mean, as the graph's own label under the
 * chart, where it takes no width from the states.
 */
function legendLabel(graph: MachineGraph): string {
  const swatch = (fill: string, text: string) =>
    `<TR><TD BGCOLOR="${fill}" WIDTH="18" HEIGHT="12" FIXEDSIZE="TRUE"></TD><TD ALIGN="LEFT">${h(text)}</TD></TR>`;
  const line = (color: string, text: string) => `<TR><TD><FONT COLOR="${color}">━━</FONT></TD><TD ALIGN="LEFT"><FONT COLOR="${color}">${h(text)}</FONT></TD></TR>`;
  const used = HEALTH.filter((health) => [...graph.nodes.values()].some((node) => node.tags.some((tag) => health.tag.test(tag))));
  const rows = [
    '<TR><TD COLSPAN="2" ALIGN="LEFT"><B>legend</B></TD></TR>',
    ...used.map((health) => swatch(health.fill, `health ${health.name}`)),
    line(COLOR.error, 'error (dashed)'),
    line(COLOR.after, 'timer (after …)'),
  ];
  if ([...graph.nodes.values()].some((node) => node.type === 'parallel' && node.children.length)) {
    rows.push(`<TR><TD BORDER="1" STYLE="dashed" COLOR="${COLOR.line}" WIDTH="18" HEIGHT="12" FIXEDSIZE="TRUE"></TD><TD ALIGN="LEFT">dashed border: a parallel region</TD></TR>`);
  }
  if ([...graph.nodes.values()].some((node) => node.badge)) rows.push('<TR><TD>⟳</TD><TD ALIGN="LEFT">retry loop shown as one state</TD></TR>');
  for (const note of graph.notes ?? []) rows.push(`<TR><TD>⚡</TD><TD ALIGN="LEFT">${h(note)}</TD></TR>`);
  return `<<TABLE BORDER="1" STYLE="rounded" COLOR="#d1d9e0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="1">${rows.join('')}</TABLE>>`;
}

/** The opening lines of the DOT: the graph's name and its graph, node and edge defaults. */
function dotHeader(graph: MachineGraph, options: DotOptions): string[] {
  const hl = options.highlight;
  const [font, edgeFont, nodesep, ranksep] = options.compact ? [15, 15, 0.18, 0.25] : [11, 10, 0.3, 0.32];
  return [
    `digraph ${q(graph.id)} {`,
    // Crossing minimisation is bounded: unbounded, the full chart costs 2.4× the time for no clearer picture, and the
    // overview spreads its long edges from `starting` over a wider page (1,691 px against 1,480 at these bounds).
    `  graph [rankdir=TB, compound=true, fontname="Helvetica", fontsize=${font}, nodesep=${nodesep}, ranksep=${ranksep}, newrank=true, pad=0.15, nslimit=2, mclimit=${options.compact ? 0.25 : 0.5}];`,
    `  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=${font}, margin="0.12,0.05"];`,
    `  edge [fontname="Helvetica", fontsize=${edgeFont}, color=${q(hl ? COLOR.faded : COLOR.line)}, arrowsize=0.7];`,
  ];
}

/** Whether a state is one region of a parallel state. */
const isRegion = (graph: MachineGraph, node: GraphNode): boolean =>
  (node.parent ? graph.nodes.get(node.parent) : undefined)?.type === 'parallel';

/** Appends a state's DOT to `out`: a compound or parallel state as a cluster holding its children, else one node. */
function emitState(graph: MachineGraph, options: DotOptions, node: GraphNode, depth: number, out: string[]): void {
  if (isCluster(node)) emitCluster(graph, options, node, depth, out);
  else out.push(nodeLine(graph, options, node, depth));
}

/** A cluster: its label and style, an entry point, its children, an exit point held below them, its initial edge. */
function emitCluster(graph: MachineGraph, options: DotOptions, node: GraphNode, depth: number, out: string[]): void {
  const hl = options.highlight;
  const pad = '  '.repeat(depth);
  const steps = hl?.visited.get(node.id);
  const region = isRegion(graph, node);
  const style = region ? 'dashed,rounded,filled' : 'rounded,filled';
  const fill = healthOf(graph, node, false)?.cluster ?? '#fbfbfc';
  out.push(`${pad}subgraph ${q(`cluster_${node.id}`)} {`);
  const label = labelOf(node, steps, region && !options.compact, hl?.durations?.get(node.id));
  out.push(`${pad}  id=${q(encodeDomId('state', node.id))}; label=${qLeft(label)}; labeljust=l; margin=10;`);
  out.push(`${pad}  style=${q(style)}; fillcolor=${q(fill)}; color=${q(steps ? COLOR.taken : '#9aa0aa')}; penwidth=${steps ? 2 : 1};`);
  if (hl && !steps) out.push(`${pad}  fontcolor=${q(COLOR.fadedText)};`);
  const entryColor = node.type === 'parallel' ? '#9aa0aa' : '#222222';
  out.push(`${pad}  ${q(anchor(node))} [shape=point, width=0.09, label="", fillcolor=${q(entryColor)}, color=${q(entryColor)}];`);
  for (const child of node.children) emitState(graph, options, graph.nodes.get(child)!, depth + 1, out);
  out.push(`${pad}  ${q(exit(node))} [shape=point, width=0.01, style=invis, label=""];`);
  for (const child of node.children.map((id) => graph.nodes.get(id)!)) {
    if (child.id !== node.initial) out.push(`${pad}  ${q(anchor(node))} -> ${q(anchor(child))} [style=invis${isCluster(child) ? `, lhead=${q(`cluster_${child.id}`)}` : ''}];`);
    out.push(`${pad}  ${q(exit(child))} -> ${q(exit(node))} [style=invis];`);
  }
  if (node.initial && graph.nodes.has(node.initial)) {
    const initial = graph.nodes.get(node.initial)!;
    const head = isCluster(initial) ? `, lhead=${q(`cluster_${initial.id}`)}` : '';
    out.push(`${pad}  ${q(anchor(node))} -> ${q(anchor(initial))} [color="#222222", arrowsize=0.6${head}];`);
  }
  out.push(`${pad}}`);
}

/** A simple or final state as one node: filled by its health or the run's outcome, bold when the run passed it. */
function nodeLine(graph: MachineGraph, options: DotOptions, node: GraphNode, depth: number): string {
  const hl = options.highlight;
  const steps = hl?.visited.get(node.id);
  const region = isRegion(graph, node);
  const outcome = hl?.final?.id === node.id ? hl.final.outcome : undefined;
  const attrs = [`id=${q(encodeDomId('state', node.id))}`, `label=${q(labelOf(node, steps, region && !options.compact, hl?.durations?.get(node.id)))}`];
  if (region) attrs.push('style="rounded,filled,dashed"');
  attrs.push(`fillcolor=${q(outcome ? COLOR[outcome] : (healthOf(graph, node, true)?.fill ?? '#ffffff'))}`);
  if (node.type === 'final') attrs.push('peripheries=2');
  if (outcome) attrs.push('penwidth=3', `color=${q(outcome === 'ok' ? COLOR.taken : COLOR.error)}`);
  else if (steps) attrs.push('penwidth=2.2', `color=${q(COLOR.taken)}`);
  else if (hl) attrs.push(`color=${q(COLOR.faded)}`, `fontcolor=${q(COLOR.fadedText)}`);
  return `${'  '.repeat(depth)}${q(node.id)} [${attrs.join(', ')}];`;
}

/** Renders a machine graph as Graphviz DOT, optionally highlighting one run's path. */
export function toDot(graph: MachineGraph, options: DotOptions = {}): string {
  const hl = options.highlight;
  const out = dotHeader(graph, options);
  const root = graph.nodes.get(graph.root)!;
  out.push(`  "::start" [id="start", shape=circle, width=0.16, style=filled, fillcolor="#222222", label=""];`);
  for (const child of root.children) emitState(graph, options, graph.nodes.get(child)!, 1, out);
  if (root.initial) {
    const initial = graph.nodes.get(root.initial)!;
    out.push(`  "::start" -> ${q(anchor(initial))} [color="#222222"${isCluster(initial) ? `, lhead=${q(`cluster_${initial.id}`)}` : ''}];`);
  }
  const finals = root.children.filter((child) => graph.nodes.get(child)!.type === 'final' && !isCluster(graph.nodes.get(child)!));
  // The outcomes line up at the bottom; in the overview, one that reports nothing (no health) stays by the state
  // that ends there, so an early exit does not widen the bottom row with an edge across the chart.
  const bottom = options.compact ? finals.filter((id) => healthOf(graph, graph.nodes.get(id)!, true) !== undefined) : finals;
  if (bottom.length) out.push(`  { rank=max; ${bottom.map(q).join('; ')}; }`);
  if (graph.edges.some((edge) => edge.source === root.id)) {
    out.push(`  "::any" [id="any-state", shape=plain, fontcolor=${q(COLOR.fadedText)}, label="in any state"];`);
  }
  const finalIds = new Set(finals);
  mergeLoops(graph.edges).forEach((edge) => out.push(...edgeLines(graph, edge, hl, finalIds)));
  out.push(...rankBelowBlocks(graph, finalIds));
  // Set last, so that no cluster inherits the legend or its placement.
  if (options.legend !== false) out.push(`  label=${legendLabel(graph)}; labelloc=b; labeljust=l;`);
  out.push('}');
  return `${out.join('\n')}\n`;
}

/** Transitions that leave a state where it is (self-loops, targetless) drawn as one loop with one label per line. */
export function mergeLoops(edges: GraphEdge[]): GraphEdge[] {
  const loops = new Map<string, GraphEdge>();
  const out: GraphEdge[] = [];
  for (const edge of edges) {
    const loop = edge.targets.length === 0 || (edge.targets.length === 1 && edge.targets[0] === edge.source);
    const existing = loop ? loops.get(edge.source) : undefined;
    if (!loop) out.push(edge);
    else if (!existing) {
      const first = { ...edge, members: edge.members ?? [edge.key] };
      loops.set(edge.source, first);
      out.push(first);
    } else {
      existing.label = `${existing.label}\n${edge.label}`;
      existing.members!.push(...(edge.members ?? [edge.key]));
      if (existing.targets.length === 0) existing.targets = edge.targets;
    }
  }
  return out;
}

/** The steps at which a run took an edge (or, in an overview, any of the edges it stands for). */
function stepsOf(edge: GraphEdge, hl: DotHighlight | undefined): number[] | undefined {
  if (!hl) return undefined;
  const steps = (edge.members ?? [edge.key]).flatMap((key) => hl.edges.get(key) ?? []);
  return steps.length ? [...new Set(steps)].sort((a, b) => a - b) : undefined;
}

/**
 * Holds every state that a top-level block (a cluster right under the root) leads to below the whole block, so
 * that what follows the parallel work is drawn under it rather than beside it, which would widen the chart by a
 * column. The block's own exit point is its bottom; the edges themselves still leave from their real source.
 */
function rankBelowBlocks(graph: MachineGraph, finals: Set<string>): string[] {
  const root = graph.nodes.get(graph.root)!;
  const lines = new Set<string>();
  for (const block of root.children.map((id) => graph.nodes.get(id)!).filter(isCluster)) {
    for (const edge of graph.edges) {
      if (edge.source === graph.root || !within(graph, edge.source, block.id) || !constrains(edge, finals)) continue;
      for (const target of edge.targets) {
        if (within(graph, target, block.id) || target === graph.root) continue;
        lines.add(`  ${q(exit(block))} -> ${q(anchor(graph.nodes.get(target)!))} [style=invis];`);
      }
    }
  }
  return [...lines];
}

/**
 * Whether an edge takes part in ranking. Errors are drawn as detours that need not push their target down, except
 * into a final state: there they keep each outcome under the state it comes from.
 */
function constrains(edge: GraphEdge, finals: Set<string>): boolean {
  return edge.kind !== 'error' || edge.targets.some((target) => finals.has(target));
}

/** One DOT edge per target (a targetless transition loops on its source), styled by kind and highlight. */
function edgeLines(graph: MachineGraph, edge: GraphEdge, hl: DotHighlight | undefined, finals: Set<string>): string[] {
  const fromRoot = edge.source === graph.root;
  const source = graph.nodes.get(edge.source)!;
  const steps = stepsOf(edge, hl);
  const targets = edge.targets.length ? edge.targets : [edge.source];
  return targets.flatMap((targetId, index) => {
    const target = graph.nodes.get(targetId)!;
    if (target.id === graph.root) return [];
    const attrs = [`id=${q(encodeDomId('edge', targets.length > 1 ? `${edge.key}#${index}` : edge.key))}`];
    attrs.push(`label=${q(steps ? `(${formatSteps(steps)}) ${edge.label}` : edge.label)}`);
    if (!fromRoot && isCluster(source) && source !== target && !within(graph, target.id, source.id)) attrs.push(`ltail=${q(`cluster_${source.id}`)}`);
    if (isCluster(target) && source !== target && !within(graph, source.id, target.id)) attrs.push(`lhead=${q(`cluster_${target.id}`)}`);
    const styles: string[] = [];
    if (edge.kind === 'error') styles.push('dashed');
    if (!edge.targets.length) styles.push('dotted');
    if (styles.length) attrs.push(`style=${q(styles.join(','))}`);
    if (fromRoot || !constrains(edge, finals)) attrs.push('constraint=false');
    if (steps) attrs.push(`color=${q(COLOR.taken)}`, `fontcolor=${q(COLOR.taken)}`, 'penwidth=2.4');
    else if (!hl && edge.kind === 'error') attrs.push(`color=${q(COLOR.error)}`, `fontcolor=${q(COLOR.error)}`);
    else if (!hl && edge.kind === 'after') attrs.push(`color=${q(COLOR.after)}`, `fontcolor=${q(COLOR.after)}`);
    else if (hl) attrs.push(`fontcolor=${q(COLOR.fadedText)}`);
    const tail = fromRoot ? '::any' : attrs.some((attr) => attr.startsWith('ltail=')) ? exit(source) : anchor(source);
    return `  ${q(tail)} -> ${q(anchor(target))} [${attrs.join(', ')}];`;
  });
}
