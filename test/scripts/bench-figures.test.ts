/**
 * bench/figures.mjs: the generated block of docs/performance.md keeps, for every benchmark a run did not run, the
 * figures and the line naming the run that measured them; the block written before there were sections is read as
 * one section per benchmark with that block's run.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { END, START, measuredLine, mergeSections, readSections, renderBlock, replaceBlock } from '../../bench/figures.mjs';
import { REPO } from '../e2e/ns.js';

const HEAD = '| benchmark | measure | median | floor (same run) | ratio | target |\n|---|---|---:|---|---:|---|';
const UNSECTIONED = `# Performance

Before.

${START}
Measured 2026-12-03 15:11 UTC on 2 × AMD EPYC, Linux 6.18.44,
Node v20.20.2; medians of 15 interleaved runs per variant, each against its floor measured in the same
run (ratio = median / floor). Regenerate with \`npm run bench\`.

${HEAD}
| cold-start | \`bootstate --version\` | 67.7 ms | node -e 0: 60.5 ms | ×1.12 | ≤ 1.15 |
| rss | peak RSS | 59.3 MiB | node -e 0: 39.3 MiB | ×1.51 | ≤ 60 MiB |
| boot-time | first SSH login (7 runs) | 830 ms | no agent: 546 ms | ×1.52 | ≤ ×1.25 |
${END}

After.
`;

const ORDER = ['cold-start', 'rss', 'monitor-cycles', 'boot-time'];

describe('the generated block of docs/performance.md', () => {
  it('reads a block without sections as one section per benchmark, each with the block\'s run', () => {
    const sections = readSections(UNSECTIONED);
    expect(sections.map((s) => s.name)).toEqual(['cold-start', 'rss', 'boot-time']);
    expect(sections[0].measured).toBe('measured 2026-12-03 15:11 UTC on 2 × AMD EPYC, Linux 6.18.44, Node v20.20.2; 15 runs per variant');
    expect(sections[2].measured).toMatch(/; 7 runs per variant$/);
    expect(sections[1].rows).toEqual(['| rss | peak RSS | 59.3 MiB | node -e 0: 39.3 MiB | ×1.51 | ≤ 60 MiB |']);
  });

  it('a partial run replaces only its own sections, keeping the others\' rows and run lines', () => {
    const fresh = [{ name: 'rss', measured: measuredLine('2026-12-06 05:00 UTC on 2 × Intel Xeon, Linux 6.18.44', 'v20.20.2', 15), rows: ['| rss | peak RSS | 58.0 MiB | | | |'] }];
    const page = replaceBlock(UNSECTIONED, renderBlock(mergeSections(readSections(UNSECTIONED), fresh, ORDER)));
    const sections = readSections(page);
    expect(sections.map((s) => s.name)).toEqual(['cold-start', 'rss', 'boot-time']);
    expect(sections[1]).toEqual(fresh[0]);
    expect(sections[0]).toEqual(readSections(UNSECTIONED)[0]);
    expect(sections[2]).toEqual(readSections(UNSECTIONED)[2]);
    expect(page).toContain('**cold-start**: measured 2026-12-03 15:11 UTC');
    expect(page).toContain('**rss**: measured 2026-12-06 05:00 UTC');
    expect(page.startsWith('# Performance\n\nBefore.\n\n')).toBe(true);
    expect(page.endsWith(`${END}\n\nAfter.\n`)).toBe(true);
  });

  it('a new benchmark takes its place in the order, and one no longer run by bench/run.mjs is dropped', () => {
    const fresh = [{ name: 'monitor-cycles', measured: 'measured now', rows: ['| monitor-cycles | CPU | 101 ms | | | |'] }];
    const merged = mergeSections(readSections(UNSECTIONED), fresh, ORDER.filter((name) => name !== 'boot-time'));
    expect(merged.map((s) => s.name)).toEqual(['cold-start', 'rss', 'monitor-cycles']);
  });

  it('reads back what it writes, and writing it again changes nothing', () => {
    const sections = readSections(UNSECTIONED);
    const page = replaceBlock(UNSECTIONED, renderBlock(sections));
    expect(readSections(page)).toEqual(sections);
    expect(replaceBlock(page, renderBlock(readSections(page)))).toBe(page);
  });

  it('appends the block with its markers to a page without one', () => {
    const page = replaceBlock('# Performance\n', renderBlock([{ name: 'rss', measured: 'measured now', rows: [] }]));
    expect(page).toMatch(new RegExp(`^# Performance\\n\\n${START}\\n[\\s\\S]*\\*\\*rss\\*\\*: measured now\\n[\\s\\S]*${END}\\n$`));
  });

  it('docs/performance.md has a block it can read, with a run line above every section', () => {
    const sections = readSections(readFileSync(path.join(REPO, 'docs/performance.md'), 'utf8'));
    expect(sections.length).toBeGreaterThan(0);
    for (const section of sections) {
      expect(section.measured, section.name).toMatch(/^measured \d{4}-\d\d-\d\d \d\d:\d\d UTC on /);
      expect(section.rows.length, section.name).toBeGreaterThan(0);
    }
  });
});
