/**
 * Sinks never decide the outcome: a destination that throws is turned off, counted and told once on the others,
 * and nothing a sink does escapes into the caller (a log call, an inspection callback).
 */
import { linkSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/log.js';
import { Sinks } from '../../src/logging/sinks.js';

const enospc = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A destination that records lines, or throws once `broken` is set. */
function destination() {
  const lines: string[] = [];
  const state = { broken: false };
  return {
    lines,
    state,
    write(chunk: string) {
      if (state.broken) throw enospc();
      lines.push(chunk);
    },
  };
}

describe('Sinks', () => {
  it('turns an observer off at its first throw, counts what is lost and tells the failure once', async () => {
    const sinks = new Sinks();
    const told: string[] = [];
    sinks.onFailure((f) => told.push(`${f.sink}: ${f.error}`));
    let calls = 0;
    const observe = sinks.observer('journal', () => {
      calls += 1;
      throw enospc();
    });
    for (let i = 0; i < 5; i++) expect(() => observe()).not.toThrow();
    await tick();
    expect(calls).toBe(1);
    expect(sinks.isOn('journal')).toBe(false);
    expect(sinks.off).toEqual([{ sink: 'journal', error: 'ENOSPC: no space left on device, write' }]);
    expect(told).toEqual(['journal: ENOSPC: no space left on device, write']);
  });

  it('tells failures seen before anyone listens once a listener is set', async () => {
    const sinks = new Sinks();
    sinks.fail('log file', new Error('cannot open'));
    const told: string[] = [];
    sinks.onFailure((f) => told.push(f.sink));
    await tick();
    expect(told).toEqual(['log file']);
  });

  it('turns a stream off on an error event, as pino destinations report asynchronous failures', () => {
    const sinks = new Sinks();
    const listeners: Array<(error: unknown) => void> = [];
    const stream = { write: () => true, on: (_: string, listener: (error: unknown) => void) => listeners.push(listener) };
    const guarded = sinks.stream('stderr', stream);
    listeners[0]!(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    guarded.write('x');
    expect(sinks.off).toEqual([{ sink: 'stderr', error: 'write EPIPE' }]);
    expect(sinks.lost).toBe(2);
  });
});

describe('the logger over failing destinations', () => {
  it('keeps logging to stderr when another destination fills up, and says so there once', async () => {
    const stderr = destination();
    const kvp = destination();
    const { log, sinks } = createLogger({ stderr: stderr as never, extra: [{ level: 'info', stream: kvp as never, sink: 'kvp telemetry' }] });
    log.info('before');
    kvp.state.broken = true;
    expect(() => log.info('during')).not.toThrow();
    expect(() => log.warn('after')).not.toThrow();
    await tick();
    const messages = stderr.lines.map((l) => JSON.parse(l).msg as string);
    expect(messages).toEqual(['before', 'during', 'after', 'kvp telemetry turned off: ENOSPC: no space left on device, write']);
    expect(sinks.off.map((s) => s.sink)).toEqual(['kvp telemetry']);
  });

  it('does not throw when stderr itself breaks', () => {
    const stderr = destination();
    stderr.state.broken = true;
    const { log, sinks } = createLogger({ stderr: stderr as never });
    expect(() => log.error('nobody hears this')).not.toThrow();
    expect(sinks.isOn('stderr')).toBe(false);
  });

  it('refuses a log file that is a symlink or a hard link, leaving its target untouched', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bootstate-sinks-'));
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'precious\n');
    symlinkSync(victim, join(dir, 'via-symlink.log'));
    linkSync(victim, join(dir, 'via-hardlink.log'));
    for (const [name, problem] of [['via-symlink.log', 'symlink'], ['via-hardlink.log', 'hard link (2 names)']] as const) {
      const stderr = destination();
      const { log, sinks, close } = createLogger({ stderr: stderr as never, logPath: join(dir, name) });
      log.info('hello');
      close();
      await tick();
      expect(sinks.off[0]?.sink).toBe('log file');
      expect(sinks.off[0]?.error).toContain(problem);
    }
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });
});
