/**
 * What every benchmark shares: interleaved repetitions with medians (these machines are noisy, so a figure is
 * only ever compared with its floor measured in the same run), the agent builds to measure, a loopback fake
 * fabric that timestamps each request on arrival, one timed provisioning run, and the result format bench/run.mjs
 * turns into the table of docs/performance.md.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

// Node reads the file NODE_EXTRA_CA_CERTS names at every start, tens of milliseconds of CPU for a system CA bundle:
// set on a build host, never for the agent on a VM. Left in, it would be in every timed process, floors and agent
// alike, and shrink every ratio; so no process a benchmark starts gets it.
delete process.env.NODE_EXTRA_CA_CERTS;

export const REPO = resolve(fileURLToPath(import.meta.url), '../..');
/** Repetitions per variant; BENCH_RUNS overrides. */
export const RUNS = Number(process.env.BENCH_RUNS ?? 15);

export interface Row {
  /** What was measured, e.g. `bootstate --version (SEA)`. */
  metric: string;
  median: number;
  unit: 'ms' | 'MiB' | 'round trips' | 'records/s' | string;
  /** The floor's median, measured in the same run. */
  floor?: number;
  floorName?: string;
  /** median / floor. */
  ratio?: number;
  target?: string;
  note?: string;
  /** The row's name in the README's table of this benchmark (bench/readme-figures.mjs); rows without one stay out. */
  readme?: string;
}

/** Prints rows for a person (stderr) and as one JSON line for bench/run.mjs (stdout). */
export function report(bench: string, rows: Row[], runs = RUNS): void {
  for (const row of rows) {
    const floor = row.floor === undefined ? '' : ` vs ${row.floorName} ${fmt(row.floor)} ${row.unit} → ×${fmt(row.ratio ?? row.median / row.floor)}`;
    process.stderr.write(`${bench}: ${row.metric}: ${fmt(row.median)} ${row.unit}${floor}${row.note ? ` (${row.note})` : ''}\n`);
  }
  process.stdout.write(`${JSON.stringify({ bench, runs, rows })}\n`);
}

/** A row comparing a measured variant with its floor. */
export function versus(metric: string, samples: number[], floorName: string, floorSamples: number[], extra: Partial<Row> = {}): Row {
  const m = median(samples);
  const f = median(floorSamples);
  return { metric, median: m, unit: 'ms', floor: f, floorName, ratio: m / f, ...extra };
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function fmt(n: number): string {
  return Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);
}

/**
 * Runs each variant `runs` times, rotating the order every round so drift in machine load hits all of them
 * alike, after one unmeasured warm-up round (page cache). Returns the samples per variant name.
 */
export async function interleave<T>(variants: Record<string, () => Promise<T>>, runs = RUNS): Promise<Record<string, T[]>> {
  const names = Object.keys(variants);
  const samples = Object.fromEntries(names.map((n) => [n, [] as T[]]));
  for (const name of names) await variants[name]();
  for (let round = 0; round < runs; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length];
      samples[name].push(await variants[name]());
    }
  }
  return samples;
}

/** One way to start the agent: the ESM bundle under node, or the single executable. */
export interface Build {
  name: string;
  argv: string[];
}

/** The builds present in dist/, ESM bundle first; throws when there is none. */
export function builds(): Build[] {
  const found: Build[] = [];
  const bundle = join(REPO, 'dist/bootstate.mjs');
  const binary = join(REPO, 'dist/bootstate');
  if (existsSync(bundle)) found.push({ name: 'node dist/bootstate.mjs', argv: [process.execPath, bundle] });
  if (existsSync(binary)) found.push({ name: 'SEA dist/bootstate', argv: [binary] });
  // The startup snapshot's variants, measured when `npm run build:snapshot` built them (docs/performance.md).
  const snapshot = join(REPO, 'dist/bootstate-snapshot');
  const snapshotBinary = join(REPO, 'dist/bootstate-snapshot-sea');
  if (existsSync(snapshot)) found.push({ name: 'snapshot dist/bootstate-snapshot', argv: [snapshot] });
  if (existsSync(snapshotBinary)) found.push({ name: 'SEA+snapshot dist/bootstate-snapshot-sea', argv: [snapshotBinary] });
  if (found.length === 0) throw new Error('no build in dist/: run `npm run build` (and `npm run build:binary`) first');
  return found;
}

export const NODE_E0: Build = { name: 'node -e 0', argv: [process.execPath, '-e', '0'] };

/** Milliseconds from spawn to exit; rejects on a non-zero exit so a broken build never yields a fast figure. */
export function timeExit(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const start = performance.now();
    const child = spawn(argv[0], argv.slice(1), { stdio: 'ignore', env });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const ms = performance.now() - start;
      if (code === 0) resolvePromise(ms);
      else reject(new Error(`${argv.join(' ')} exited with ${code ?? signal}`));
    });
  });
}

export interface Arrival {
  route: string | null;
  method: string;
  body: string;
  /** performance.now() when the whole request had arrived. */
  at: number;
}

export interface Fabric {
  imdsUrl: string;
  healthUrl: string;
  arrivals: Arrival[];
  /** Forgets recorded arrivals and resolves once `route` has seen a request whose body contains `marker`. */
  expect(route: string, marker?: string): Promise<Arrival>;
  close(): Promise<void>;
}

/** A fake fabric on loopback that answers every request after `latencyMs` (0: at once). */
export async function startFabric(latencyMs = 0): Promise<Fabric> {
  const module = existsSync(join(REPO, 'src/fabric/fake-fabric.ts'))
    ? await import('../src/fabric/fake-fabric.js')
    : await import('../src/fabric/fake-fabric.js');
  const arrivals: Arrival[] = [];
  let waiter: { route: string; marker: string; resolve(a: Arrival): void } | null = null;
  const fabric = await module.startFakeFabric({
    onRequest: (request: { route: string | null; method: string; body: string }) => {
      const arrival = { route: request.route, method: request.method, body: request.body, at: performance.now() };
      arrivals.push(arrival);
      if (waiter && arrival.route === waiter.route && arrival.body.includes(waiter.marker)) waiter.resolve(arrival);
    },
  });
  if (latencyMs > 0) {
    for (const route of ['imds', 'health', 'healthService', 'hostPluginHealth', 'hostPluginVersions'] as const) {
      fabric.setBehaviour(route, { delayMs: latencyMs });
    }
  }
  return {
    imdsUrl: fabric.imdsUrl,
    healthUrl: fabric.healthUrl,
    arrivals,
    expect: (route, marker = '') => {
      arrivals.length = 0;
      return new Promise((resolveArrival) => {
        waiter = { route, marker, resolve: resolveArrival };
      });
    },
    close: () => fabric.close(),
  };
}

export interface ProvisionTiming {
  /** Spawn → first IMDS request arrived. */
  firstImds: number;
  /** Spawn → the Ready POST arrived. */
  ready: number;
  /** Spawn → the process exited. */
  exit: number;
  /** Requests the fabric saw, with arrival times relative to spawn. */
  arrivals: Arrival[];
  stderr: string;
}

/**
 * Provisions once with `--scratch` into a fresh temp tree, the fabric's URLs and temp paths in a `--config`
 * file, and times it from spawn. Rejects unless Ready arrived and the agent exited 0.
 */
export async function timeProvisioning(build: Build, fabric: Fabric): Promise<ProvisionTiming> {
  const dir = mkdtempSync(join(tmpdir(), 'bootstate-bench-'));
  try {
    const config = join(dir, 'bench.toml');
    writeFileSync(config, benchConfig(fabric, dir));
    const ready = fabric.expect('health', '"Ready"');
    const start = performance.now();
    const child = spawn(build.argv[0], [...build.argv.slice(1), 'provision', '--scratch', join(dir, 'root'), '--config', config], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, BOOTSTATE_LOG: 'error' },
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exit = new Promise<number>((resolveExit, reject) => {
      child.on('error', reject);
      child.on('exit', (code, signal) => {
        if (code === 0) resolveExit(performance.now() - start);
        else reject(new Error(`${build.name} provision exited with ${code ?? signal}: ${stderr.slice(-2000)}`));
      });
    });
    // The agent waits for Ready's answer before it exits, so a clean exit without Ready is a failed run.
    const readyArrival = await Promise.race([ready, exit.then(() => Promise.reject(new Error(`${build.name}: exited without reporting Ready`)))]);
    const exitMs = await exit;
    const arrivals = fabric.arrivals.map((a) => ({ ...a, at: a.at - start }));
    const firstImds = arrivals.find((a) => a.route === 'imds');
    if (!firstImds) throw new Error(`${build.name}: no IMDS request arrived`);
    return { firstImds: firstImds.at, ready: readyArrival.at - start, exit: exitMs, arrivals, stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The floor client: node, one IMDS GET, one Ready POST, nothing else. Times spawn → Ready arrival and exit. */
export async function timeFloor(fabric: Fabric): Promise<{ firstImds: number; ready: number; exit: number }> {
  const ready = fabric.expect('health', '"Ready"');
  const start = performance.now();
  const exit = timeExit([process.execPath, join(REPO, 'bench/floor-client.mjs'), fabric.imdsUrl, fabric.healthUrl]);
  const [arrival, exitMs] = await Promise.all([ready, exit]);
  const firstImds = fabric.arrivals.find((a) => a.route === 'imds')!.at - start;
  return { firstImds, ready: arrival.at - start, exit: exitMs };
}

/** Points the agent at the fabric and keeps every file it writes in the run's temp tree. */
export function benchConfig(fabric: Fabric, dir: string): string {
  const q = JSON.stringify;
  return `[imds]
endpoint = ${q(fabric.imdsUrl)}

[wireserver]
health_endpoint = ${q(fabric.healthUrl)}

[data_dir]
path = ${q(join(dir, 'data'))}

[log_path]
path = ${q(join(dir, 'bootstate.log'))}

[telemetry]
kvp_dir = ${q(join(dir, 'kvp'))}
`;
}
