/**
 * Deadlines on abort signals (src/core/signals.ts withDeadline), used by every HTTP attempt, the primary NIC's probe
 * and the monitor's hostname publication: a deadline must abort even when nothing but the wait listening to it holds
 * it and the garbage collector runs, which a signal made by AbortSignal.any over AbortSignal.timeout does not on
 * Node 20 (a pool VM's probe waited past its deadline for a NIC renamed under it, and an IMDS request past its own).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { withDeadline } from '../../src/core/signals.js';
import { REPO } from '../e2e/ns.js';

/** Runs `body` (an ES module; `make()` gives the signal under test) with --expose-gc; its stdout. */
function collected(make: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'bootstate-deadline-'));
  try {
    const script = path.join(dir, 'check.mjs');
    writeFileSync(
      script,
      `${make}\nlet signal = await make();\nsignal.addEventListener('abort', () => { console.log('aborted'); process.exit(0); });\n` +
        `signal = null;\nsetTimeout(() => globalThis.gc(), 100);\nsetTimeout(() => globalThis.gc(), 300);\n` +
        `setTimeout(() => { console.log('never aborted'); process.exit(1); }, 5000);\n`,
    );
    return spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', script], { cwd: REPO, encoding: 'utf8', timeout: 60_000 }).stdout.trim();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('a deadline on a signal', () => {
  it('aborts once its time is up, though the collector ran and nothing else holds it', () => {
    const module = path.join(REPO, 'src/core/signals.ts');
    expect(collected(`const make = async () => (await import(${JSON.stringify(module)})).withDeadline(new AbortController().signal, 500).signal;`)).toBe('aborted');
  }, 90_000);

  it('aborts with the signal it was given, and clear() drops the timer', async () => {
    const parent = new AbortController();
    const d = withDeadline(parent.signal, 60_000);
    expect(d.signal.aborted).toBe(false);
    parent.abort();
    expect(d.signal.aborted).toBe(true);
    d.clear();
    const quiet = withDeadline(new AbortController().signal, 20);
    quiet.clear();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(quiet.signal.aborted).toBe(false);
  });

  it('says whether the time ran out or the caller aborted, and needs no caller signal', async () => {
    const parent = new AbortController();
    const byCaller = withDeadline(parent.signal, 60_000, { unref: true });
    parent.abort();
    expect([byCaller.signal.aborted, byCaller.timedOut()]).toEqual([true, false]);
    byCaller.clear();
    const alone = withDeadline(undefined, 20);
    await new Promise((resolve) => alone.signal.addEventListener('abort', resolve, { once: true }));
    expect(alone.timedOut()).toBe(true);
    const already = new AbortController();
    already.abort();
    expect(withDeadline(already.signal, 60_000, { unref: true }).signal.aborted).toBe(true);
  });
});
