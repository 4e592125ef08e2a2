import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RECORD_BYTES } from '../../src/kvp/codec.js';
import { KvpStore } from '../../src/kvp/store.js';
import { KvpTelemetry } from '../../src/kvp/telemetry.js';
import { STATE } from '../support/chart.js';
import { here, python, rawRecords, tempDir } from './helpers.js';

let dir: string;
let cleanup: () => void;
beforeEach(() => ({ dir, cleanup } = tempDir()));
afterEach(() => cleanup());

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: path.resolve(here, '../..') });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr}`))));
  });
}

const pythonWriter = (pool: string, count: number, tag: string, batch: number) =>
  run('python3', [path.join(here, 'writer.py'), pool, String(count), tag, String(batch)]);
const nodeWorker = (mode: 'append' | 'churn', pool: string, count: number, tag: string, batch = 1) =>
  run(process.execPath, ['--import', 'tsx', path.join(here, 'append-worker.ts'), mode, pool, String(count), tag, String(batch)]);

describe('sharing a pool with flock writers', () => {
  it('keeps every record of concurrent Python (cloud-init style) writers and bootstate appends and rewrites intact', async () => {
    const pool = path.join(dir, '.kvp_pool_1');
    const writers = [
      { kind: 'py', tag: 'p1', count: 150, batch: 1 },
      { kind: 'py', tag: 'p2', count: 150, batch: 4 },
      { kind: 'node', tag: 'n1', count: 150, batch: 5 },
      { kind: 'node', tag: 'n2', count: 100, batch: 2 },
    ];
    await Promise.all([
      ...writers.map((w) => (w.kind === 'py' ? pythonWriter(pool, w.count, w.tag, w.batch) : nodeWorker('append', pool, w.count, w.tag, w.batch))),
      nodeWorker('churn', pool, 60, 'c'),
    ]);

    expect(fs.statSync(pool).size % RECORD_BYTES).toBe(0);
    const records = rawRecords(pool);
    expect(records).toHaveLength(551);
    expect(records.filter((r) => r.key === 'node|c|churn')).toEqual([{ key: 'node|c|churn', value: 'final 59' }]);
    for (const w of writers) {
      const mine = records.filter((r) => r.key.startsWith(`${w.kind}|${w.tag}|`));
      expect(mine.map((r) => r.key)).toEqual(Array.from({ length: w.count }, (_, i) => `${w.kind}|${w.tag}|${i}`));
      expect(mine.every((r) => r.value === `value ${r.key.split('|')[2]} of ${w.tag} é€`)).toBe(true);
    }
  }, 120_000);

  it('writes records a cloud-init style Python reader decodes exactly as bootstate does', () => {
    const pool = path.join(dir, '.kvp_pool_1');
    const t = new KvpTelemetry({ dir, bootTime: null, vmId: 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8' });
    t.stateSpan(STATE.imdsFetching, { start: new Date(0), end: new Date(1500), result: 'done' });
    t.event('WARN', 'provisioning.report', `naïve ${'日本語'.repeat(200)} 😀`);
    t.event('ERROR', 'log', 'x'.repeat(3000));
    t.writeReport('result=error|reason=http status error|agent=bootstate/0.1.0');
    const fromPython = JSON.parse(python('reader.py', [pool])) as Array<[string, string]>;
    const ours = new KvpStore({ path: pool }).dump();
    expect(ours.length).toBeGreaterThan(5);
    expect(fromPython).toEqual(ours.map((r) => [r.key, r.value]));
  });
});
