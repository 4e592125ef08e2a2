// The README quotes a few benchmarks' figures in tables of their own, between <!-- bench:NAME:start --> and
// <!-- bench:NAME:end -->. bench/run.mjs rewrites the table of each benchmark it ran, from the rows that carry a
// `readme` name; the tables of benchmarks it did not run are left as they were.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmt } from './figures.mjs';

/** Rewrites README.md's table of each section that has one; `measured` says when and on what. */
export function writeReadmeFigures(root, sections, measured) {
  const target = join(root, 'README.md');
  let text = readFileSync(target, 'utf8');
  for (const section of sections) {
    const start = `<!-- bench:${section.name}:start -->`;
    const end = `<!-- bench:${section.name}:end -->`;
    const from = text.indexOf(start);
    const to = text.indexOf(end);
    if (from < 0 || to < from) continue;
    text = `${text.slice(0, from + start.length)}\n${readmeTable(section, measured)}\n${text.slice(to)}`;
    process.stderr.write(`wrote ${section.name}'s figures into README.md\n`);
  }
  writeFileSync(target, text);
}

/** One row per `readme` row: its median and its ratio to the floor; a failed run says so instead. */
export function readmeTable(section, measured) {
  if (section.failed) return `\`${section.name}\` **failed** in its last run (${measured}): ${section.failed}.`;
  const rows = section.rows.filter((row) => row.readme);
  const lines = ['| | median | against the floor |', '|---|---:|---:|'];
  for (const row of rows) {
    const median = Number.isFinite(row.median) ? `${fmt(row.median)} ${row.unit}` : 'did not complete';
    const ratio = row.floor === undefined || !Number.isFinite(row.median) ? '' : `×${fmt(row.ratio ?? row.median / row.floor)}`;
    lines.push(`| ${row.readme} | ${median} | ${ratio} |`);
  }
  lines.push('', `Medians of ${section.runs ?? '?'} runs, ${measured} ([all figures](docs/performance.md#the-figures)).`);
  return lines.join('\n');
}
