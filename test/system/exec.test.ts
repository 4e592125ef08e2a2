import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { isCommandMissing, run } from '../../src/system/exec.js';

/** Whether a process exists and is not a zombie (PID 1 here may not reap orphans). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('run', () => {
  it('passes arguments without a shell and feeds stdin', async () => {
    const result = await run(['sh', '-c', 'cat; echo "$1"', 'sh', '$(not expanded); *'], { stdin: Buffer.from('in:') });
    expect(result.stdout).toBe('in:$(not expanded); *\n');
  });

  it('throws SUBPROCESS_FAILED with the command, exit status and stderr tail but never stdin', async () => {
    const error = await run(['sh', '-c', 'cat >/dev/null; echo boom >&2; exit 3'], { stdin: Buffer.from('user:hunter2') }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BootstateError);
    const e = error as BootstateError;
    expect(e.code).toBe('SUBPROCESS_FAILED');
    expect(Object.fromEntries(e.data)).toMatchObject({ exit_status: '3', stderr: 'boom\n' });
    expect(JSON.stringify(e.toFailure())).not.toContain('hunter2');
  });

  it('reports a missing command as such', async () => {
    const error = await run(['bootstate-no-such-command']).catch((e: unknown) => e);
    expect(isCommandMissing(error)).toBe(true);
  });

  it('kills the whole process group on abort, leaving no grandchild behind', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'exec-'));
    const pidFile = path.join(dir, 'pid');
    const controller = new AbortController();
    const pending = run(['sh', '-c', 'sleep 30 & echo $! > "$1"; wait', 'sh', pidFile], { signal: controller.signal });
    while (!(await readFile(pidFile, 'utf8').catch(() => '')).trim()) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    const error = (await pending.catch((e: unknown) => e)) as BootstateError;
    expect(Object.fromEntries(error.data)).toMatchObject({ ended_by: 'abort' });
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    await new Promise((r) => setTimeout(r, 100));
    expect(running(pid)).toBe(false);
    await rm(dir, { recursive: true });
  });

  it('kills a command that outlives its timeout', async () => {
    const started = Date.now();
    const error = (await run(['sleep', '30'], { timeoutMs: 200 }).catch((e: unknown) => e)) as BootstateError;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(Object.fromEntries(error.data)).toMatchObject({ ended_by: 'timeout' });
    expect(error.retryable).toBe(true);
  });

  it('runs the child at the niceness asked for, set before it reads its stdin', async () => {
    // The child waits for its stdin, which is written after the priority was set: no race with its exec.
    const own = Number((await run(['sh', '-c', 'read x; nice'], { stdin: Buffer.from('go\n') })).stdout.trim());
    const niced = Number((await run(['sh', '-c', 'read x; nice'], { stdin: Buffer.from('go\n'), nice: own + 10 })).stdout.trim());
    expect(niced).toBe(Math.min(19, own + 10));
  });

  it('caps captured output', async () => {
    const result = await run(['sh', '-c', 'head -c 100000 /dev/zero'], { maxOutputBytes: 1000 });
    expect(result.stdout.length).toBe(1000);
  });

  it('returns the result of a failing command when asked to', async () => {
    const result = await run(['sh', '-c', 'exit 4'], { allowFailure: true });
    expect(result.exitCode).toBe(4);
  });
});
