/**
 * Mermaid `stateDiagram-v2` text for a {@link MachineGraph}, for docs that render Mermaid (GitHub, mkdocs):
 * composite states nest, parallel regions are separated by `--`, final states lead to `[*]`.
 */
import type { GraphNode, MachineGraph } from './graph.js';

/** Characters Mermaid would parse in a quoted description or a transition label are replaced by safe ones. */
function text(value: string): string {
  return value.replace(/["#;:{}<>\n\r`]/g, ' ').replace(/\s+/g, ' ').trim();
}

/** Renders a machine graph as Mermaid `stateDiagram-v2` text. */
export function toMermaid(graph: MachineGraph): string {
  const ids = new Map<string, string>();
  for (const id of graph.nodes.keys()) {
    let name = `s_${id.replace(/[^A-Za-z0-9]/g, '_')}`;
    while ([...ids.values()].includes(name)) name += '_';
    ids.set(id, name);
  }
  const lines = ['stateDiagram-v2'];
  const emit = (node: GraphNode, depth: number): void => {
    const pad = '  '.repeat(depth);
    const id = ids.get(node.id)!;
    const description = [node.key, ...node.tags.map((tag) => `(${tag})`)].map(text).join(' ');
    if (!node.children.length) {
      lines.push(`${pad}state "${description}" as ${id}`);
      return;
    }
    lines.push(`${pad}state "${description}" as ${id} {`);
    node.children.forEach((child, index) => {
      if (node.type === 'parallel' && index > 0) lines.push(`${pad}  --`);
      emit(graph.nodes.get(child)!, depth + 1);
    });
    if (node.initial) lines.push(`${pad}  [*] --> ${ids.get(node.initial)}`);
    for (const child of node.children) {
      if (graph.nodes.get(child)!.type === 'final') lines.push(`${pad}  ${ids.get(child)} --> [*]`);
    }
    lines.push(`${pad}}`);
  };
  const root = graph.nodes.get(graph.root)!;
  emit(root, 1);
  lines.push(`  [*] --> ${ids.get(root.id)}`);
  for (const edge of graph.edges) {
    const source = ids.get(edge.source)!;
    const targets = edge.targets.length ? edge.targets : [edge.source];
    for (const target of targets) lines.push(`  ${source} --> ${ids.get(target)} : ${text(edge.label)}`);
  }
  return `${lines.join('\n')}\n`;
}
