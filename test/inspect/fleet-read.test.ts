/**
 * Reading many journals for the fleet view: what one journal contributes (outcome, reason, READY=1, steps), and
 * bad input counted and named, never thrown: empty, torn, corrupt, not a journal, a directory, random bytes, a
 * monitor journal; paths, directories and globs expanded.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expandGlob, provisioningChart, readFleet, readFleetRun, segmentPattern, type FleetChart } from '../../src/inspect/fleet-read.js';
import { fleetHtml } from '../../src/inspect/fleet-html.js';
import { fleetText } from '../../src/inspect/fleet-text.js';

const FIXTURE = path.resolve('test/inspect/imds-retry-journal.jsonl');
const fixture = fs.readFileSync(FIXTURE, 'utf8');
let chart: FleetChart;
let dir: string;
beforeAll(async () => {
  chart = await provisioningChart();
});
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-fleet-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const write = (name: string, text: string | Buffer): string => {
  const file = path.join(dir, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
};

describe('one journal', () => {
  it('a failed run: its outcome, the report\'s reason and cause, READY=1 when reportingFailure was entered, its backoff timed', async () => {
    const result = await readFleetRun(FIXTURE, chart);
    expect('run' in result).toBe(true);
    if (!('run' in result)) return;
    const { run } = result;
    expect(run).toMatchObject({ outcome: 'failed', ok: false, reason: 'operation timed out', exitCode: 1 });
    expect(run.cause).toMatch(/IMDS/);
    expect(run.acceptedMs).toBeUndefined();
    // The last line (the failure report done) is 1,022 ms after the first; READY=1 came when reporting began.
    expect(run.totalMs).toBe(1022);
    expect(run.readyMs).toBeGreaterThan(900);
    expect(run.readyMs).toBeLessThanOrEqual(run.totalMs);
    expect(run.states['provisioning.work.gathering.imds.fetching.backoff']).toBeGreaterThan(800);
    expect(Object.keys(run.states).some((state) => state.endsWith('waitingForImds'))).toBe(false);
  });
});

describe('bad input is counted and named, never thrown', () => {
  it('names each unreadable journal with why, counts a torn one as a truncated run, skips a monitor journal', async () => {
    const lines = fixture.trim().split('\n');
    const files = {
      good: write('good.jsonl', fixture),
      torn: write('torn.jsonl', `${lines.slice(0, 10).join('\n')}\n${lines[10]!.slice(0, 40)}`),
      empty: write('empty.jsonl', ''),
      corrupt: write('corrupt.jsonl', `${lines[0]}\n{not json\n${lines[1]}\n`),
      notJournal: write('other.jsonl', '{"hello":"world"}\n'),
      binary: write('binary.jsonl', Buffer.from([0, 255, 254, 10, 1, 2, 3])),
      monitor: write('monitor.jsonl', lines[0]!.replace('"machine":"provisioning"', '"machine":"monitor"')),
      directory: path.join(dir, 'dir.jsonl'),
    };
    fs.mkdirSync(path.join(files.directory, 'inside'), { recursive: true });
    const fifo = path.join(dir, 'fifo.jsonl');
    execFileSync('mkfifo', [fifo]);
    const { summary } = await readFleet([...Object.values(files), fifo, path.join(dir, 'missing.jsonl')], chart);
    expect(summary.runs, JSON.stringify(summary.unreadable)).toBe(2);
    expect(summary.outcomes).toEqual([
      { key: 'failed', count: 1 },
      { key: 'incomplete', count: 1 },
    ]);
    expect(summary.truncated).toEqual([files.torn]);
    const why = Object.fromEntries(summary.unreadable.map((u) => [path.basename(u.source), u.why]));
    expect(why).toMatchObject({
      'empty.jsonl': 'empty',
      'corrupt.jsonl': 'line 2 is not JSON',
      'other.jsonl': 'line 1 is not a journal line (no time)',
      'missing.jsonl': 'no such file or directory',
      'fifo.jsonl': 'not a regular file',
    });
    expect(why['binary.jsonl']).toMatch(/line 1/);
    expect(summary.skipped).toEqual([{ source: files.monitor, why: 'a journal of the monitor chart' }]);
    // A directory is searched for journals (none here), not read as one.
    expect(why['dir.jsonl']).toBeUndefined();
    const text = fleetText(summary);
    expect(text).toContain('unreadable (not counted)\n');
    expect(text).toContain(`\n  ${files.corrupt}: line 2 is not JSON\n`);
    expect(text).toMatch(/^2 runs from 9 sources: 0 ok \(0\.0%\), 6 unreadable, 1 truncated, 1 skipped\n/);
  });

  it('random bytes and random JSON lines never throw: each file is a run, unreadable or skipped', async () => {
    const line = fc.oneof(fc.string(), fc.json(), fc.constantFrom(...fixture.split('\n')));
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)), fc.array(line, { maxLength: 8 }).map((ls) => ls.join('\n'))), { minLength: 1, maxLength: 5 }), async (contents) => {
        const sub = fs.mkdtempSync(path.join(dir, 'case-'));
        contents.forEach((content, i) => fs.writeFileSync(path.join(sub, `${i}.jsonl`), content));
        const { summary } = await readFleet([sub], chart);
        expect(summary.runs + summary.unreadable.length + summary.skipped.length).toBe(contents.length);
        expect(() => fleetText(summary)).not.toThrow();
        expect(fleetHtml(summary, [])).toMatch(/<\/html>\n$/);
      }),
      { numRuns: 40 },
    );
  });

  it('escapes what a journal says in the HTML page, and the page loads nothing from outside', async () => {
    const evil = fixture.replaceAll('operation timed out', '<script>alert(1)</script>');
    write('evil.jsonl', evil);
    const { summary, runs } = await readFleet([dir], chart);
    const html = fleetHtml(summary, runs, '<b>title</b>');
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<b>title</b>');
    expect(html).not.toMatch(/\s(src|href)=/);
    expect(html).toContain("default-src 'none'");
  });

  it('prints what a journal or an OTLP export says with its control characters escaped: no terminal escape reaches the screen', async () => {
    const esc = '\u001b]0;owned\u0007\u001b[2J\u009b31m';
    write('evil.jsonl', fixture.replaceAll('operation timed out', JSON.stringify(`timed out${esc}\nfake line`).slice(1, -1)));
    const otlpRoot = {
      traceId: `t${esc}`, spanId: '01', name: 'provision', startTimeUnixNano: '1765000000000000000', endTimeUnixNano: '1765000001000000000',
      attributes: [
        { key: 'bootstate.result', value: { stringValue: `failed${esc}` } },
        { key: 'bootstate.exit_code', value: { intValue: '1' } },
        { key: 'bootstate.error.reason', value: { stringValue: `reason${esc}` } },
        { key: 'bootstate.error.cause', value: { stringValue: `cause${esc}` } },
      ],
    };
    const service = { key: 'service.name', value: { stringValue: 'bootstate' } };
    write('evil-otlp.jsonl', `${JSON.stringify({ resourceSpans: [{ resource: { attributes: [service] }, scopeSpans: [{ spans: [otlpRoot] }] }] })}\n`);
    write(`bad${esc.replaceAll('/', '')}.jsonl`, 'not json\nnot json\n');
    const { summary } = await readFleet([dir], chart);
    expect(summary.runs, JSON.stringify(summary.unreadable)).toBe(2);
    const text = fleetText(summary);
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(text).not.toMatch(/^fake line/m);
    expect(text).toContain('\\x1b]0;owned');
  });
});

describe('large journals', () => {
  it('a journal over 1 MiB is streamed and read whole; a line over 4 MiB names the journal instead of being held', async () => {
    const lines = fixture.trim().split('\n');
    const retry = lines.slice(5, 7);
    const start = Date.parse(JSON.parse(lines[0]!).t);
    const body: string[] = lines.slice(0, 5);
    // The fixture's retry pair, again and again, each pair 10 ms later: a run that retried for a long time.
    let size = 0;
    for (let i = 0; size < 3 << 20; i++) {
      for (const line of retry) {
        body.push(line.replace(/^\{"t":"[^"]+"/, `{"t":"${new Date(start + 100 + i * 10).toISOString()}"`));
        size += line.length + 1;
      }
    }
    const long = write('long.jsonl', `${body.join('\n')}\n${lines.at(-1)!.replace(/^\{"t":"[^"]+"/, `{"t":"${new Date(start + 100 + body.length * 5).toISOString()}"`)}\n`);
    expect(fs.statSync(long).size).toBeGreaterThan(3 << 20);
    const result = await readFleetRun(long, chart);
    expect(result).toMatchObject({ run: { outcome: 'failed', reason: 'operation timed out' } });
    if ('run' in result) expect(result.run.totalMs).toBeGreaterThan(10_000);
    const huge = write('huge.jsonl', `${lines[0]}\n{"t":"${'x'.repeat(5 << 20)}"}\n`);
    expect(await readFleetRun(huge, chart)).toEqual({ unreadable: { source: huge, why: expect.stringMatching(/^line \d+ is longer than 4194304 bytes$/) } });
  });
});

describe('paths', () => {
  it('a directory is every *.jsonl under it at any depth; a glob expands *, ?, […] and **', async () => {
    const a = write('vm1/runs/a.jsonl', fixture);
    const b = write('vm2/runs/b.jsonl', fixture);
    write('vm2/runs/notes.txt', 'x');
    expect(expandGlob(path.join(dir, 'vm?/runs/*.jsonl'))).toEqual([a, b]);
    expect(expandGlob(path.join(dir, '**/*.jsonl'))).toEqual([a, b]);
    expect(expandGlob(path.join(dir, 'vm[2]/runs/*'))).toEqual([b, path.join(dir, 'vm2/runs/notes.txt')]);
    expect((await readFleet([dir], chart)).summary.runs).toBe(2);
    // The same journal named twice counts once.
    expect((await readFleet([a, dir, path.join(dir, 'vm*/runs/a.jsonl')], chart)).summary.runs).toBe(2);
  });

  it('a glob segment matches as the shell does, its other characters literally', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', '.', '(', '+', '$', '\\', 'b'), maxLength: 8 }), (name) => {
        expect(segmentPattern(name).test(name)).toBe(true);
        expect(segmentPattern('*').test(name)).toBe(true);
      }),
    );
    expect(segmentPattern('2026-*.jsonl').test('2026-01-01T00-00-00Z-vm.jsonl')).toBe(true);
    expect(segmentPattern('2026-*.jsonl').test('2026-01.json')).toBe(false);
    expect(segmentPattern('[!a]?').test('bc')).toBe(true);
    expect(segmentPattern('[!a]?').test('ac')).toBe(false);
  });
});
