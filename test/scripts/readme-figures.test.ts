/**
 * bench/readme-figures.mjs: the README's tables of benchmark figures are rewritten from a run's rows, one
 * benchmark's table at a time, and only between that benchmark's markers.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script of bench/, without types
import { writeReadmeFigures } from '../../bench/readme-figures.mjs';

const write = writeReadmeFigures as (root: string, sections: unknown[], measured: string) => void;
let root = '';
afterEach(() => rmSync(root, { recursive: true, force: true }));

function readmeWith(text: string): string {
  root = mkdtempSync(path.join(tmpdir(), 'bootstate-readme-'));
  writeFileSync(path.join(root, 'README.md'), text);
  return path.join(root, 'README.md');
}

const PEERS = [
  { metric: 'long name of a', median: 4442.2, unit: 'ms', floor: 3718.7, ratio: 4442.2 / 3718.7, readme: 'agent a' },
  { metric: 'long name of b', median: Number.NaN, unit: 'ms', readme: 'agent b' },
  { metric: 'not for the README', median: 1, unit: 'ms' },
  { metric: 'floor', median: 3718.7, unit: 'ms', readme: 'no agent' },
];

describe('writeReadmeFigures', () => {
  it('puts the rows named for the README between the benchmark\'s markers, with the runs and the date', () => {
    const file = readmeWith('intro\n<!-- bench:peers:start -->\nold\n<!-- bench:peers:end -->\nafter\n');
    write(root, [{ name: 'peers', rows: PEERS, runs: 5 }], '2026-12-06, 2 cores');
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('| agent a | 4442 ms | ×1.19 |');
    expect(text).toContain('| agent b | did not complete |  |');
    expect(text).toContain('| no agent | 3719 ms |  |');
    expect(text).toContain('Medians of 5 runs, 2026-12-06, 2 cores');
    expect(text).not.toContain('not for the README');
    expect(text).not.toContain('\nold\n');
    expect(text.startsWith('intro\n<!-- bench:peers:start -->\n|')).toBe(true);
    expect(text.endsWith('<!-- bench:peers:end -->\nafter\n')).toBe(true);
  });

  it('leaves the tables of benchmarks that did not run, and says so when one failed', () => {
    const kept = '<!-- bench:other:start -->\nkept figures\n<!-- bench:other:end -->';
    const file = readmeWith(`${kept}\n<!-- bench:peers:start -->\nold\n<!-- bench:peers:end -->\n`);
    write(root, [{ name: 'peers', rows: [], failed: 'exited with 1' }], '2026-12-06');
    const text = readFileSync(file, 'utf8');
    expect(text).toContain(kept);
    expect(text).toContain('`peers` **failed** in its last run (2026-12-06): exited with 1.');
  });

  it('changes nothing when the README has no markers for the benchmark', () => {
    const file = readmeWith('no markers here\n');
    write(root, [{ name: 'peers', rows: PEERS, runs: 5 }], '2026-12-06');
    expect(readFileSync(file, 'utf8')).toBe('no markers here\n');
  });
});
