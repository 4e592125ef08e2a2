/**
 * Soak benchmark for `bootstate monitor`: runs the real monitor in-process with 50 ms periods against the fake
 * fabric on loopback, with recurring /health outages long enough to roll up to unhealthy and IMDS documents
 * that fail validation now and then, and samples memory at the start, middle and end. Prints one JSON object.
 *
 *   npx tsx bench/monitor-soak.ts [--cycles 1200]
 *   node --expose-gc --import tsx bench/monitor-soak.ts     (adds heapUsed after a forced GC)
 *
 * What it represents: `cycles` heartbeat measurements (and as many IMDS ones), each with its observation and
 * POST. At 50 ms periods 1,200 cycles take about a minute; at the production period of one minute they are
 * 20 hours of operation. Memory that grows with cycles would show up as growth between middle and end.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG, type Config } from '../src/config/defaults.js';
import type { MonitorLog } from '../src/azure/healthservice.js';
import { runMonitor } from '../src/monitor/run.js';
import { startFakeFabric } from '../src/fabric/fake-fabric.js';

const { values } = parseArgs({ options: { cycles: { type: 'string', default: '1200' } } });
const cycles = Number(values.cycles);
const PERIOD_SECS = 0.05;
const gc = (globalThis as { gc?: () => void }).gc;

interface Sample {
  cycle: number;
  seconds: number;
  rssMiB: number;
  heapUsedMiB: number;
}

const counts = { health: 0, imds: 0, posts: 0, observations: 0, unhealthy: 0, maxPerPost: 0 };
const fabric = await startFakeFabric({
  onRequest: (request) => {
    if (request.route === 'hostPluginHealth') counts.health += 1;
    if (request.route === 'imds') counts.imds += 1;
    if (request.route === 'healthService') {
      const n = (JSON.parse(request.body) as { Observations: unknown[] }).Observations.length;
      counts.posts += 1;
      counts.observations += n;
      counts.maxPerPost = Math.max(counts.maxPerPost, n);
    }
  },
});
// Eight failed heartbeats in every forty outlast the 250 ms window; one IMDS document in ten lacks `network`.
let healthAnswers = 0;
fabric.setHostPlugin(() => (healthAnswers++ % 40 < 8 ? { status: 500 } : 'ok'));
let imdsAnswers = 0;
fabric.setImds(() => (imdsAnswers++ % 10 === 0 ? { status: 200, body: { compute: {} } } : 'ok'));

const config: Config = {
  ...DEFAULT_CONFIG,
  monitor: {
    ...DEFAULT_CONFIG.monitor,
    heartbeat_period_secs: PERIOD_SECS,
    imds_period_secs: PERIOD_SECS,
    versions_period_secs: PERIOD_SECS,
    heartbeat_rollup_secs: PERIOD_SECS * 5,
    imds_rollup_secs: PERIOD_SECS * 3,
    request_timeout_secs: 2,
  },
};
const quiet: MonitorLog = { debug: () => undefined, info: () => undefined, warn: () => undefined };
const abort = new AbortController();
const started = performance.now();
const run = runMonitor({
  config,
  once: false,
  signal: abort.signal,
  log: quiet,
  onUnhealthy: () => {
    counts.unhealthy += 1;
  },
  handleSignals: false,
  endpoints: { healthService: fabric.healthServiceUrl, hostPlugin: fabric.hostPluginUrl, imds: new URL(fabric.imdsUrl).origin },
});

/** Reads memory after dropping the fabric's own request log, which would otherwise be the growth we measure. */
function sample(): Sample {
  fabric.requests.length = 0;
  gc?.();
  const { rss, heapUsed } = process.memoryUsage();
  const mib = (n: number) => Math.round((n / 1024 / 1024) * 10) / 10;
  return { cycle: counts.health, seconds: Math.round((performance.now() - started) / 100) / 10, rssMiB: mib(rss), heapUsedMiB: mib(heapUsed) };
}

async function untilCycle(n: number): Promise<void> {
  while (counts.health < n) {
    if (counts.health % 100 === 0) fabric.requests.length = 0;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const warmup = Math.min(50, Math.floor(cycles / 10));
await untilCycle(warmup);
const start = sample();
await untilCycle(Math.floor(cycles / 2));
const middle = sample();
await untilCycle(cycles);
const end = sample();
const stopAt = performance.now();
abort.abort();
const { exitCode } = await run;
const stopMs = Math.round(performance.now() - stopAt);
await fabric.close();

console.log(
  JSON.stringify(
    {
      bench: 'monitor-soak',
      periodMs: PERIOD_SECS * 1000,
      cycles: counts.health,
      represents: `${counts.health} one-minute cycles = ${Math.round((counts.health / 60) * 10) / 10} h of production monitoring`,
      wallSeconds: end.seconds,
      meanCycleMs: Math.round(((end.seconds - start.seconds) * 1000) / Math.max(1, end.cycle - start.cycle)),
      gcForced: gc !== undefined,
      samples: { start, middle, end },
      growth: {
        rssMiB: Math.round((end.rssMiB - start.rssMiB) * 10) / 10,
        rssMiBSecondHalf: Math.round((end.rssMiB - middle.rssMiB) * 10) / 10,
        heapUsedMiB: Math.round((end.heapUsedMiB - start.heapUsedMiB) * 10) / 10,
        heapUsedMiBSecondHalf: Math.round((end.heapUsedMiB - middle.heapUsedMiB) * 10) / 10,
      },
      traffic: { ...counts },
      stop: { exitCode, ms: stopMs },
    },
    null,
    2,
  ),
);
