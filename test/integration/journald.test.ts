/**
 * Logs journald understands: started by systemd (JOURNAL_STREAM names the stream that is its stderr), the agent
 * writes one text line per event with the syslog priority prefix; the log file stays JSON; `--log-format` decides
 * when given. Retried IMDS and report failures are warnings naming the attempt and the budget left.
 */
import { closeSync, fstatSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { formatTextLine, stderrFormat } from '../../src/logging/log-text.js';
import { runAgent } from './agent.js';

let fabric: FakeFabric;
beforeAll(async () => {
  fabric = await startFakeFabric();
});
afterAll(async () => {
  await fabric.close();
});

/** Runs the agent with stderr on a file whose device:inode is announced in JOURNAL_STREAM, as systemd does. */
async function runUnderJournal(args: string[] = [], announce = true): Promise<{ code: number | null; stderr: string; log: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'bootstate-journal-'));
  const file = join(dir, 'stderr');
  const fd = openSync(file, 'w+');
  const { dev, ino } = fstatSync(fd);
  try {
    const run = await runAgent(fabric, {
      args,
      stderrFd: fd,
      env: { BOOTSTATE_LOG: 'info', JOURNAL_STREAM: announce ? `${dev}:${ino}` : `${dev}:${ino + 1}` },
    });
    return { code: run.code, stderr: readFileSync(file, 'utf8'), log: readFileSync(join(run.root, 'var/log/bootstate.log'), 'utf8') };
  } finally {
    closeSync(fd);
  }
}

describe('under systemd (JOURNAL_STREAM is stderr)', () => {
  it('writes text lines with syslog priorities, warnings for retried attempts with the attempt and budget left', async () => {
    fabric.reports.length = 0;
    fabric.setImds({ status: 503 }, { status: 500 }, 'ok');
    fabric.setWireserver({ status: 503 }, 'ok');
    const run = await runUnderJournal();
    fabric.setImds();
    fabric.setWireserver();
    expect(run.code).toBe(0);
    const lines = run.stderr.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(line).toMatch(/^<[2-7]>[^{]/);
    expect(lines).toContainEqual(expect.stringMatching(/^<6>provisioning finished: provisioned /));
    expect(lines).toContainEqual(expect.stringMatching(/^<4>IMDS attempt 1 failed: .*503.*; next attempt in 0\.1 s, \d+ s of 5 s left .*attempt=1 /));
    expect(lines).toContainEqual(expect.stringMatching(/^<4>IMDS attempt 2 failed: .*500.*attempt=2 /));
    expect(lines).toContainEqual(expect.stringMatching(/^<4>NotReady\/Provisioning report attempt 1 failed: .*503.*s of 5 s left/));
    expect(run.stderr).not.toContain('"level"');
    const file = run.log.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { level: number; msg: string; attempt?: number });
    expect(file.find((entry) => entry.msg.startsWith('IMDS attempt 2 failed'))).toMatchObject({ level: 40, attempt: 2 });
  });

  it('writes JSON to stderr with --log-format json', async () => {
    const run = await runUnderJournal(['--log-format', 'json']);
    expect(run.code).toBe(0);
    for (const line of run.stderr.split('\n').filter(Boolean)) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('keeps JSON when JOURNAL_STREAM names another stream (stderr was redirected)', async () => {
    const run = await runUnderJournal([], false);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stderr.split('\n')[0]!)).toHaveProperty('msg');
  });
});

describe('the text form of a log line', () => {
  it('maps pino levels to syslog priorities and keeps every field on one line', () => {
    const json = (level: number, extra = {}) => JSON.stringify({ level, time: 't', pid: 1, msg: 'two\nlines', ...extra });
    expect(formatTextLine(json(60), true)).toBe('<2>two lines\n');
    expect(formatTextLine(json(50, { code: 'X' }), true)).toBe('<3>two lines code=X\n');
    expect(formatTextLine(json(40, { error: 'a b' }), true)).toBe('<4>two lines error="a b"\n');
    expect(formatTextLine(json(30, { detail: { a: 1 } }), true)).toBe('<6>two lines detail="{\\"a\\":1}"\n');
    expect(formatTextLine(json(20), true)).toBe('<7>two lines\n');
    expect(formatTextLine(json(40), false)).toBe('WARN two lines\n');
  });

  it('chooses text only for the journal, unless told', () => {
    expect(stderrFormat(undefined, {})).toBe('json');
    expect(stderrFormat('text', {})).toBe('text');
    expect(stderrFormat(undefined, { BOOTSTATE_LOG_FORMAT: 'text' })).toBe('text');
    expect(stderrFormat('json', { JOURNAL_STREAM: '1:2' })).toBe('json');
  });
});
