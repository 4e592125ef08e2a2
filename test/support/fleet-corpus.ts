/**
 * Recorded runs for the fleet view: the built agent (dist/bootstate.mjs) run for real against the fake fabric on
 * loopback, every endpoint at 127.0.0.1, with a mix of faults, and each run's journal copied into one directory.
 * A real run takes a few hundred ms to a few s on 2 cores, so a large fleet is made by replicating the distinct
 * real runs (`replicate`): each copy gets its own VM id (file name) and its own start (every line's time shifted
 * by the same amount), so the copies keep their runs' shapes and durations exactly.
 */
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { runAgent } from '../integration/agent.js';
import { limitConcurrency } from '../hardening/slots.js';

/** One kind of run in the mix and what the fleet view must say of it. */
export interface FleetScenario {
  name: string;
  arrange(fabric: FakeFabric): void;
  imds?: Record<string, number>;
  wireserver?: Record<string, number>;
  /** SIGKILL the agent once its journal has this many lines (a crash: the journal ends before a final state). */
  killAtLines?: number;
  outcome: string;
  /** The failure reason the view must count it under; absent for runs that end well. */
  reason?: string;
  ready: boolean;
  accepted: boolean;
}

const SHORT = { total_retry_timeout_secs: 1, retry_interval_secs: 0.2, request_timeout_secs: 1, connection_timeout_secs: 1 };
const SHORT_WIRE = { total_retry_timeout_secs: 1, retry_interval_secs: 0.2, read_timeout_secs: 1, connection_timeout_secs: 1 };
const onReady = (fabric: FakeFabric, status: number) => fabric.setWireserver((request) => (request.body.includes('"Ready"') ? { status } : 'ok'));

export const SCENARIOS: FleetScenario[] = [
  { name: 'ok', arrange: () => {}, outcome: 'provisioned', ready: true, accepted: true },
  { name: 'imds-500-twice', arrange: (f) => f.setImds({ status: 500 }, { status: 500 }, 'ok'), outcome: 'provisioned', ready: true, accepted: true },
  { name: 'imds-slow-300ms', arrange: (f) => f.delayImds(300), outcome: 'provisioned', ready: true, accepted: true },
  { name: 'ready-503-once', arrange: (f) => f.setWireserver('ok', { status: 503 }, 'ok'), outcome: 'provisioned', ready: true, accepted: true },
  {
    name: 'imds-503-forever',
    arrange: (f) => f.setImds({ status: 503 }),
    imds: SHORT,
    outcome: 'failed',
    reason: 'operation timed out',
    ready: true,
    accepted: false,
  },
  { name: 'imds-403', arrange: (f) => f.setImds({ status: 403 }), imds: SHORT, outcome: 'failed', reason: 'http status error', ready: true, accepted: false },
  {
    name: 'imds-wrong-shape',
    arrange: (f) => f.setImds({ status: 200, body: [1, 2, 3] }),
    imds: SHORT,
    outcome: 'failed',
    reason: 'invalid IMDS metadata',
    ready: true,
    accepted: false,
  },
  {
    name: 'ready-503-forever',
    arrange: (f) => onReady(f, 503),
    wireserver: SHORT_WIRE,
    outcome: 'failed',
    reason: 'operation timed out',
    ready: true,
    accepted: false,
  },
  { name: 'ready-404', arrange: (f) => onReady(f, 404), wireserver: SHORT_WIRE, outcome: 'failed', reason: 'http status error', ready: true, accepted: false },
  {
    name: 'killed-while-imds-stalls',
    arrange: (f) => f.setImds('stall'),
    imds: { ...SHORT, total_retry_timeout_secs: 30, request_timeout_secs: 30 },
    killAtLines: 3,
    outcome: 'incomplete',
    reason: 'ended before a final state (last status active)',
    ready: false,
    accepted: false,
  },
];

/** A recorded run: its scenario and where its journal was copied. */
export interface RecordedRun {
  scenario: FleetScenario;
  journal: string;
  /** Wall time of the agent process, spawn to exit. */
  ms: number;
}

/** The number of lines of the journal in `runs`, 0 while there is none. */
function journalLineCount(runs: string): number {
  try {
    const [name] = readdirSync(runs).filter((file) => file.endsWith('.jsonl'));
    return name ? readFileSync(join(runs, name), 'utf8').split('\n').length - 1 : 0;
  } catch {
    return 0;
  }
}

/** SIGKILLs `child` once its journal has `lines` lines (polled every 20 ms; at the latest after 20 s). */
function killAt(child: ChildProcess, runs: string, lines: number): void {
  const started = Date.now();
  const poll = setInterval(() => {
    if (child.exitCode !== null || child.signalCode !== null) clearInterval(poll);
    else if (journalLineCount(runs) >= lines || Date.now() - started > 20_000) {
      clearInterval(poll);
      child.kill('SIGKILL');
    }
  }, 20);
}

/** Runs the agent once for `scenario` and copies its journal into `dir`. */
async function recordOne(scenario: FleetScenario, dir: string, index: number): Promise<RecordedRun> {
  const fabric = await startFakeFabric();
  const root = mkdtempSync(join(tmpdir(), 'bootstate-fleet-run-'));
  const runs = join(root, 'var/lib/bootstate/runs');
  try {
    scenario.arrange(fabric);
    const run = await runAgent(fabric, {
      root,
      imds: { ...scenario.imds },
      wireserver: { ...scenario.wireserver },
      onSpawn: (child) => {
        if (scenario.killAtLines !== undefined) killAt(child, runs, scenario.killAtLines);
      },
    });
    const [name] = readdirSync(runs).filter((file) => file.endsWith('.jsonl'));
    if (!name) throw new Error(`${scenario.name}: the run left no journal`);
    const target = join(dir, `${scenario.name}-${index}`);
    mkdirSync(target, { recursive: true });
    copyFileSync(join(runs, name), join(target, name));
    return { scenario, journal: join(target, name), ms: run.ms };
  } finally {
    rmSync(root, { recursive: true, force: true });
    await fabric.close();
  }
}

/** Records `perScenario` real runs of each scenario into `dir`, at most `concurrency` agents at once. */
export async function recordFleet(dir: string, perScenario: number, concurrency = 2, scenarios = SCENARIOS): Promise<RecordedRun[]> {
  const inSlot = limitConcurrency(concurrency);
  const jobs = scenarios.flatMap((scenario) => Array.from({ length: perScenario }, (_, i) => inSlot(() => recordOne(scenario, dir, i))));
  return Promise.all(jobs);
}

/** A VM id for copy `n`: a UUID's shape, distinct per copy. */
const vmIdOf = (n: number): string => `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;

/**
 * Writes `total` journals into `dir` by cycling through `recorded`: copy n is recorded run n mod k with its own VM
 * id and every line's time moved by n minutes. Returns the scenario of each copy, in order.
 */
export function replicate(recorded: readonly RecordedRun[], dir: string, total: number): FleetScenario[] {
  mkdirSync(dir, { recursive: true });
  const out: FleetScenario[] = [];
  for (let n = 0; n < total; n++) {
    const source = recorded[n % recorded.length]!;
    const shift = n * 60_000;
    const lines = readFileSync(source.journal, 'utf8').split('\n');
    const moved = lines.map((line) => line.replace(/^\{"t":"([^"]+)"/, (_, t: string) => `{"t":"${new Date(Date.parse(t) + shift).toISOString()}"`));
    const start = new Date(Date.parse(JSON.parse(lines[0]!).t) + shift).toISOString().replace(/:/g, '-');
    writeFileSync(join(dir, `${start}-${vmIdOf(n)}.jsonl`), moved.join('\n'));
    out.push(source.scenario);
  }
  return out;
}
