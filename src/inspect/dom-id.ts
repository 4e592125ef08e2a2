/**
 * Reversible, attribute-safe ids for SVG elements, so the trace can find a state's or an edge's `<g>` in
 * Graphviz output and tag it with data attributes whatever characters a state name holds. Only `[A-Za-z0-9.]`
 * pass through, because Graphviz rewrites even `-` as an entity in the SVG it writes.
 */

const PREFIX = { state: 'state_', edge: 'edge_' } as const;

/** Encodes any string into `[A-Za-z0-9.]` plus `_XX` hex escapes, behind a kind prefix. */
export function encodeDomId(kind: 'state' | 'edge', value: string): string {
  const body = [...Buffer.from(value, 'utf8')]
    .map((byte) => {
      const char = String.fromCharCode(byte);
      return /[A-Za-z0-9.]/.test(char) ? char : `_${byte.toString(16).padStart(2, '0')}`;
    })
    .join('');
  return `${PREFIX[kind]}${body}`;
}

/** Decodes an id made by {@link encodeDomId}; returns undefined for ids it did not make. */
export function decodeDomId(id: string): { kind: 'state' | 'edge'; value: string } | undefined {
  const match = /^(state|edge)_((?:[A-Za-z0-9.]|_[0-9a-f]{2})*)$/.exec(id);
  if (!match) return undefined;
  const body = match[2]!;
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '_') {
      bytes.push(parseInt(body.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(body.charCodeAt(i));
  }
  return { kind: match[1] as 'state' | 'edge', value: Buffer.from(bytes).toString('utf8') };
}
