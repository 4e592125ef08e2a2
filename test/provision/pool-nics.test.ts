/**
 * The deadline of the primary NIC's probe (src/provision/pool-nics.ts withDeadline): it must abort even when nothing
 * but the wait listening to it holds it and the garbage collector runs, which a signal made by AbortSignal.any over
 * AbortSignal.timeout does not on Node 20 (the probe then waited past its deadline for a NIC renamed under it).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { withDeadline } from '../../src/provision/pool-nics.js';
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

describe('the probe deadline', () => {
  it('aborts once its time is up, though the collector ran and nothing else holds it', () => {
    const module = path.join(REPO, 'src/provision/pool-nics.ts');
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
});
