/**
 * `bootstate trace` on a journal of a very long run once ran out of time and memory reading it whole. The journal is
 * streamed (read twice, never held) and the page written as it is made; these tests trace a journal of tens of MB
 * with the built CLI under a heap limit the old whole-file reading could not live within, and check the page.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { formatSteps } from '../../src/inspect/dot.js';
import { readJournal, streamJournal } from '../../src/inspect/journal.js';
import { MAX_SEGMENTS } from '../../src/inspect/timeline.js';
import { writeLargeJournal } from './large-journal.js';

const AGENT = resolve('dist/bootstate.mjs');
const dir = mkdtempSync(join(tmpdir(), 'bootstate-trace-large-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const collect = async (file: string) => {
  const out: unknown[] = [];
  for await (const line of streamJournal(file)) out.push(line);
  return out;
};

describe('streamJournal', () => {
  it('reads what readJournal reads, a torn last line dropped, a bad line before another one refused', async () => {
    const fixture = resolve('test/inspect/imds-retry-journal.jsonl');
    expect(await collect(fixture)).toEqual(readJournal(fixture));
    const torn = join(dir, 'torn.jsonl');
    writeFileSync(torn, `${readFileSync(fixture, 'utf8')}\n\n{"t":"2026-`);
    expect(await collect(torn)).toEqual(readJournal(fixture));
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, `{"seq":0}\nnot json\n{"seq":2}\n`);
    await expect(collect(bad)).rejects.toThrow(`${bad}:2: not a journal line`);
    expect(() => readJournal(bad)).toThrow(`${bad}:2: not a journal line`);
  });
});

describe('formatSteps', () => {
  it('lists a few runs of steps in full and shortens a long list to its ends and its count', () => {
    expect(formatSteps([1, 3, 4, 5, 9])).toBe('1, 3-5, 9');
    const alternate = Array.from({ length: 50 }, (_, i) => 2 * i + 1);
    expect(formatSteps(alternate)).toBe('1, 3, 5, 7, 9, 11, … 91, 93, 95, 97, 99 (50 steps)');
  });
});

describe('trace of a large journal', () => {
  it('writes the whole page of a ~40 MB journal within a 160 MB heap: every line a row, the story and the counts right', async () => {
    const journal = join(dir, 'large.jsonl');
    const cycles = 40_000;
    const lines = writeLargeJournal(journal, cycles);
    expect(statSync(journal).size).toBeGreaterThan(35e6);
    const output = join(dir, 'large.html');
    // The heap limit is the memory bound: reading the file whole, as trace did, needs several times the journal.
    const { stdout } = await promisify(execFile)(process.execPath, ['--max-old-space-size=160', AGENT, 'trace', journal, '--output', output], { maxBuffer: 1 << 20 });
    // 40 000 retries of 100 ms: 66m40s and a little.
    expect(stdout).toBe(`FAILED after 66m40s: IMDS did not answer usefully within 1 s; last error: http status error (operation timed out, exit 1)\ntrace: ${output}\n`);
    const html = readFileSync(output, 'utf8');
    expect(html).toContain(`<span>steps <b>${lines}</b></span>`);
    const rows = [...html.matchAll(/<tr data-seq="(\d+)">/g)].map((match) => Number(match[1]));
    expect(rows).toHaveLength(lines);
    expect(rows.every((seq, index) => seq === index)).toBe(true);
    expect(html).toContain('data-state="provisioning.failed" data-visited="true" data-step="' + (lines - 1) + '" data-end="failed"');
    // The retry loop's request state (two steps before the loop, one a cycle): every visit in the hover hooks, the
    // label shortened to its ends and count.
    const requesting = /<g id="[^"]+" class="node" data-state="provisioning\.provisioning\.work\.gathering\.imds\.fetching\.requesting" data-visited="true" data-step="([\d ]+)"/.exec(html);
    expect(requesting?.[1]!.split(' ')).toHaveLength(cycles + 2);
    expect(html).toContain(`(${cycles + 2} steps)`);
    // Each timeline row stays bounded however long the run.
    for (const row of html.matchAll(/<div class="row" data-state="[^"]+">(.*?)<\/div>/g)) {
      expect((row[1]!.match(/class="bar"/g) ?? []).length).toBeLessThanOrEqual(MAX_SEGMENTS);
    }
  }, 300_000);
});
