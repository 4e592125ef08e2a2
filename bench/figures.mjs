// The generated block of docs/performance.md: one section per benchmark, each with the line saying which run measured
// it (date, machine, Node, repetitions) above its table. A run replaces the sections of the benchmarks it ran and
// keeps the others as they were, so `--only` never drops another benchmark's figures nor passes them off as its own.

export const START = '<!-- bench:start -->';
export const END = '<!-- bench:end -->';
const SECTION = /^<!-- bench:section (\S+) -->$/;
const TABLE_HEAD = ['| benchmark | measure | median | floor (same run) | ratio | target |', '|---|---|---:|---|---:|---|'];
const PREAMBLE = [
  'Each section is from the run its first line names: medians of interleaved runs per variant, each against its floor',
  'measured in the same run (ratio = median / floor). `npm run bench` regenerates every section;',
  '`node bench/run.mjs --only NAME,…` replaces the sections of the benchmarks it names and keeps the others.',
];

/**
 * The sections in `text` (the whole page) as `{name, measured, rows}`, `rows` being the table's lines as written.
 * A block written before sections existed (one "Measured …" header over one table) is read as one section per
 * benchmark, each with that header's run.
 */
export function readSections(text) {
  const start = text.indexOf(START);
  const end = text.indexOf(END);
  if (start < 0 || end < start) return [];
  const lines = text.slice(start + START.length, end).split('\n');
  const sections = [];
  let current = null;
  for (const line of lines) {
    const marker = SECTION.exec(line.trim());
    if (marker) {
      current = { name: marker[1], measured: '', rows: [] };
      sections.push(current);
    } else if (current && !current.measured && line.startsWith(`**${current.name}**`)) {
      current.measured = line.slice(`**${current.name}**`.length).replace(/^:\s*/, '');
    } else if (current && line.startsWith('| ') && !TABLE_HEAD.includes(line)) {
      current.rows.push(line);
    }
  }
  return sections.length ? sections : readUnsectioned(lines);
}

function readUnsectioned(lines) {
  const header = lines.filter((line) => line && !line.startsWith('|')).join(' ');
  const run = /Measured (.*?),?\s+Node (v[\d.]+); medians of (\S+) interleaved runs/.exec(header);
  const byName = new Map();
  for (const line of lines) {
    if (!line.startsWith('| ') || TABLE_HEAD.includes(line)) continue;
    const name = line.split('|')[1].trim();
    if (!byName.has(name)) byName.set(name, { name, measured: '', rows: [] });
    byName.get(name).rows.push(line);
  }
  // That table noted on a benchmark's rows when its repetitions differed from the header's.
  for (const section of byName.values()) {
    const own = section.rows.map((row) => /[(;] ?(\d+) runs\)/.exec(row)?.[1]).find(Boolean);
    section.measured = run ? measuredLine(run[1], run[2], own ?? run[3]) : 'measured in an earlier run';
  }
  return [...byName.values()];
}

/** `measured <when> on <machine>, Node <version>; <runs> runs per variant` (without the runs when not known). */
export function measuredLine(whenAndMachine, node, runs) {
  return `measured ${whenAndMachine}, Node ${node}${runs === undefined ? '' : `; ${runs} runs per variant`}`;
}

/**
 * `previous` with every section of `fresh` in place of the one of the same name; sections follow `order`, and one
 * whose benchmark is no longer in `order` is dropped.
 */
export function mergeSections(previous, fresh, order) {
  const byName = new Map(previous.map((s) => [s.name, s]));
  for (const section of fresh) byName.set(section.name, section);
  return order.filter((name) => byName.has(name)).map((name) => byName.get(name));
}

/** The block, markers included. */
export function renderBlock(sections) {
  const lines = [START, ...PREAMBLE];
  for (const section of sections) {
    lines.push('', `<!-- bench:section ${section.name} -->`, `**${section.name}**: ${section.measured}`, '', ...TABLE_HEAD, ...section.rows);
  }
  lines.push(END);
  return lines.join('\n');
}

/** `text` (the whole page) with its block replaced by `block`, or with `block` appended when it has none. */
export function replaceBlock(text, block) {
  const start = text.indexOf(START);
  const end = text.indexOf(END);
  return start >= 0 && end > start ? `${text.slice(0, start)}${block}${text.slice(end + END.length)}` : `${text.trimEnd()}\n\n${block}\n`;
}

/** A figure as the tables show it: three significant digits or so; `–` for a figure that was not measured. */
export function fmt(n) {
  if (typeof n !== 'number' || Number.isNaN(n)) return '–';
  return Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);
}
