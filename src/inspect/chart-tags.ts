/**
 * `data-*` hooks on the Graphviz `<g>` of every state and edge, decoded from the ids `toDot` gave them, so the
 * trace and the live view find a state or a transition by the names the journal uses. In an overview a node or
 * an edge also lists the full chart's states or transitions it stands for (`data-members`, JSON).
 */
import { decodeDomId } from './dom-id.js';
import { mergeLoops, type DotHighlight } from './dot.js';
import type { GraphEdge, MachineGraph } from './graph.js';

/** Escapes text for a double-quoted attribute. */
const attr = (text: string): string => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

export interface TagOptions {
  /** The run's path: adds `data-visited`, `data-taken`, `data-step` and `data-end`. */
  highlight?: DotHighlight;
  outcome?: string;
  /** For an overview: full chart state → the node that shows it. */
  alias?: Map<string, string>;
}

/** Tags every state and edge group of an SVG that `toDot(graph)` produced. */
export function tagSvg(svg: string, graph: MachineGraph, options: TagOptions = {}): string {
  const edges = new Map<string, GraphEdge>(mergeLoops(graph.edges).map((edge) => [edge.key, edge]));
  const membersOf = new Map<string, string[]>();
  for (const [state, shown] of options.alias ?? []) membersOf.set(shown, [...(membersOf.get(shown) ?? []), state]);
  const hl = options.highlight;
  return svg.replace(/<g id="((?:state|edge)_[A-Za-z0-9._]*)" class="(node|cluster|edge)"/g, (whole, id: string, cls: string) => {
    const decoded = decodeDomId(id);
    if (!decoded) return whole;
    const out = [`<g id="${id}" class="${cls}"`];
    if (decoded.kind === 'state') {
      out.push(`data-state="${attr(decoded.value)}"`);
      const members = membersOf.get(decoded.value);
      if (members && (members.length > 1 || members[0] !== decoded.value)) out.push(`data-members="${attr(JSON.stringify(members))}"`);
      if (hl) {
        const steps = hl.visited.get(decoded.value) ?? [];
        out.push(`data-visited="${steps.length > 0}" data-step="${steps.join(' ')}"`);
        if (hl.final?.id === decoded.value) out.push(`data-end="${attr(options.outcome ?? '')}"`);
      }
      return out.join(' ');
    }
    const key = decoded.value.replace(/#\d+$/, '');
    const members = edges.get(key)?.members ?? [key];
    out.push(`data-edge="${attr(key)}"`);
    if (members.length > 1 || members[0] !== key) out.push(`data-members="${attr(JSON.stringify(members))}"`);
    if (hl) {
      const steps = [...new Set(members.flatMap((member) => hl.edges.get(member) ?? []))].sort((a, b) => a - b);
      out.push(`data-taken="${steps.length > 0}" data-step="${steps.join(' ')}"`);
    }
    return out.join(' ');
  });
}
