/**
 * A reader for the part of YAML netplan files use: block mappings and sequences by indentation, flow sequences and
 * flow mappings of scalars on one line, quoted and plain scalars, `#` comments. No anchors, tags, multi-line
 * scalars or multiple documents: what it cannot read it leaves out, and it never throws. It serves only to find
 * the image's netplan definitions of an interface (bootstate renders its own YAML as text).
 */

export type YamlValue = string | YamlValue[] | { [key: string]: YamlValue };

interface Line {
  indent: number;
  text: string;
}

function stripComment(line: string): string {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i);
  }
  return line;
}

function scalar(text: string): YamlValue {
  const t = text.trim();
  if (t.startsWith('[') && t.endsWith(']')) {
    return t.slice(1, -1).split(',').map((s) => s.trim()).filter(Boolean).map(scalar);
  }
  if (t.startsWith('{') && t.endsWith('}')) {
    const out: Record<string, YamlValue> = {};
    for (const part of t.slice(1, -1).split(',')) {
      const colon = part.indexOf(':');
      if (colon > 0) out[unquote(part.slice(0, colon).trim())] = scalar(part.slice(colon + 1));
    }
    return out;
  }
  return unquote(t);
}

function unquote(t: string): string {
  if (t.length >= 2 && (t[0] === '"' || t[0] === "'") && t.at(-1) === t[0]) return t.slice(1, -1);
  return t;
}

/** `key: value` → [key, value]; the colon must be followed by a space or the end of the line. */
function splitKey(text: string): [string, string] | null {
  const m = /^("[^"]*"|'[^']*'|[^\s"'][^:]*?)\s*:(?:\s+(.*))?$/.exec(text);
  return m ? [unquote(m[1]!), m[2] ?? ''] : null;
}

function block(lines: Line[], start: number, indent: number): [YamlValue, number] {
  if (start >= lines.length || lines[start]!.indent < indent) return ['', start];
  const first = lines[start]!;
  const isSeq = first.text.startsWith('- ') || first.text === '-';
  const map: Record<string, YamlValue> = {};
  const seq: YamlValue[] = [];
  let i = start;
  while (i < lines.length && lines[i]!.indent === first.indent) {
    const { text } = lines[i]!;
    if (isSeq) {
      if (!text.startsWith('-')) break;
      seq.push(scalar(text.slice(1)));
      i++;
      continue;
    }
    const kv = splitKey(text);
    i++;
    if (!kv) continue;
    if (kv[1] !== '') map[kv[0]] = scalar(kv[1]);
    else if (i < lines.length && lines[i]!.indent > first.indent) [map[kv[0]], i] = block(lines, i, lines[i]!.indent);
    else map[kv[0]] = '';
  }
  while (i < lines.length && lines[i]!.indent > first.indent) i++;
  return [isSeq ? seq : map, i];
}

/** The document as nested mappings, sequences and strings (every scalar a string). */
export function parseYamlSubset(text: string): YamlValue {
  const lines: Line[] = [];
  for (const raw of text.split('\n')) {
    const body = stripComment(raw.replace(/\t/g, ' ')).trimEnd();
    if (body.trim() === '' || body.trim() === '---') continue;
    lines.push({ indent: body.length - body.trimStart().length, text: body.trim() });
  }
  return lines.length === 0 ? {} : block(lines, 0, lines[0]!.indent)[0];
}
