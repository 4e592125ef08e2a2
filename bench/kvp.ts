/**
 * KVP telemetry throughput: 1,000 events through KvpTelemetry (a flush every 50 events and one at the end, as
 * the agent batches) against a Python writer that locks per event as cloud-init does, in the same run.
 * Also times bootstate flushing after every event, which isolates the cost of one lock (flock(2) through the addon).
 * Prints JSON to stdout. Run: npx tsx bench/kvp.ts [--events N] [--reps N]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RECORD_BYTES } from '../src/kvp/codec.js';
import { KvpTelemetry } from '../src/kvp/telemetry.js';

const { values } = parseArgs({ options: { events: { type: 'string' }, reps: { type: 'string' }, 'unbatched-events': { type: 'string' } } });
const EVENTS = Number(values.events ?? 1000);
const REPS = Number(values.reps ?? 5);
const UNBATCHED = Number(values['unbatched-events'] ?? 100);
const BATCH = 50;
const here = path.dirname(fileURLToPath(import.meta.url));

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round = (x: number) => Math.round(x * 10) / 10;

function freshPool(): { dir: string; pool: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-kvp-bench-'));
  return { dir, pool: path.join(dir, '.kvp_pool_1') };
}

function checkRecords(pool: string, expected: number): void {
  const size = fs.statSync(pool).size;
  if (size !== expected * RECORD_BYTES) throw new Error(`expected ${expected} records in ${pool}, found ${size / RECORD_BYTES}`);
}

function bootstateRun(events: number, batchSize: number): number {
  const { dir, pool } = freshPool();
  try {
    const started = performance.now();
    const telemetry = new KvpTelemetry({ dir, bootTime: null, vmId: '00000000-0000-0000-0000-000000000000', batchSize });
    for (let i = 0; i < events; i++) telemetry.event('INFO', 'bench.event', `event ${i} of the benchmark`);
    telemetry.flush();
    const elapsed = performance.now() - started;
    if (telemetry.stats.errors > 0) throw new Error(`telemetry failed: ${telemetry.lastError}`);
    checkRecords(pool, events);
    return elapsed;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function pythonRun(events: number): { loop: number; wall: number } {
  const { dir, pool } = freshPool();
  try {
    const started = performance.now();
    const result = spawnSync('python3', [path.join(here, 'kvp_writer.py'), pool, String(events)], { encoding: 'utf8' });
    const wall = performance.now() - started;
    if (result.status !== 0) throw new Error(`kvp_writer.py failed: ${result.stderr}`);
    checkRecords(pool, events);
    return { loop: (JSON.parse(result.stdout) as { loop_ms: number }).loop_ms, wall };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

bootstateRun(BATCH, BATCH);
pythonRun(10);
const batched: number[] = [];
const unbatched: number[] = [];
const pyLoop: number[] = [];
const pyWall: number[] = [];
for (let rep = 0; rep < REPS; rep++) {
  batched.push(bootstateRun(EVENTS, BATCH));
  const py = pythonRun(EVENTS);
  pyLoop.push(py.loop);
  pyWall.push(py.wall);
  unbatched.push(bootstateRun(UNBATCHED, 1));
}

const bootstateMs = median(batched);
const pythonMs = median(pyLoop);
const perLockMs = median(unbatched) / UNBATCHED;
const flushes = Math.ceil(EVENTS / BATCH);
process.stdout.write(
  `${JSON.stringify(
    {
      benchmark: 'kvp-telemetry',
      events: EVENTS,
      reps: REPS,
      bootstate_batched: { batch: BATCH, flushes, median_ms: round(bootstateMs), runs_ms: batched.map(round) },
      python_lock_per_event: { median_loop_ms: round(pythonMs), median_wall_ms: round(median(pyWall)), runs_loop_ms: pyLoop.map(round) },
      python_over_bootstate: round((pythonMs / bootstateMs) * 100) / 100,
      bootstate_lock_per_event: { events: UNBATCHED, median_ms: round(median(unbatched)), per_event_ms: round(perLockMs) },
      python_per_event_ms: round((pythonMs / EVENTS) * 1000) / 1000,
      machine: { node: process.version, cpus: os.cpus().length, loadavg: os.loadavg().map(round) },
    },
    null,
    2,
  )}\n`,
);
