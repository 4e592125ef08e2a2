/**
 * The monitor as it ships: `bootstate monitor --once`, the cycle bootstate-monitor.timer starts every minute, run by
 * the built program (node dist/bootstate.mjs, and the single executable dist/bootstate) each cycle in its own
 * process, against the fake fabric on loopback (every endpoint pointed there), with its state file, log file and
 * KVP pool in a scratch directory. `node -e 0` runs beside it, interleaved, as the floor of any Node process, and so
 * does bench/monitor-floor.cjs, a steady cycle's HTTP exchanges made with bare node:http and nothing else.
 *
 * A simulated day is 1,440 cycles run back to back (BENCH_MONITOR_CYCLES changes it): each stands for one minute
 * of production, so the time factor is 60 s / the cycle's wall time. Between cycles nothing of the monitor is
 * resident, so averaged over the day:
 *   CPU: CPU time per cycle / 60 s, as a share of one core (target ≤ 0.2 %);
 *   RSS: peak RSS × cycle wall time / 60 s, an upper bound of the time-averaged RSS (target ≤ 30 MiB);
 *   growth: the slope of the cycles' peak RSS per 60 cycles (a simulated hour), which a leak would carry from one
 *   cycle to the next only through the state file.
 *
 *   npm run build && npm run build:binary && node --import tsx bench/monitor-cycles.ts
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeFabric } from '../src/fabric/fake-fabric.js';
import { type Row, NODE_E0, REPO, builds, median, report } from './harness.js';

const CYCLES = Number(process.env.BENCH_MONITOR_CYCLES ?? 1440);
const EXCHANGES = 'the same exchanges, bare node:http';
const MINUTE_MS = 60_000;

interface Run {
  name: string;
  round: number;
  code: number;
  user_us: number;
  sys_us: number;
  maxrss_kib: number;
  wall_ms: number;
  stderr: string;
}

const fabric = await startFakeFabric();
const dir = mkdtempSync(join(tmpdir(), 'bootstate-bench-monitor-'));
try {
  const q = JSON.stringify;
  const configFor = (name: string) => {
    const file = join(dir, `${name}.toml`);
    writeFileSync(
      file,
      `[wireserver]\naddress = "127.0.0.1"\n[monitor]\nhealth_service_port = ${fabric.ports.wireserver}\nhost_plugin_port = ${fabric.ports.hostPlugin}\n` +
        `state_file = ${q(join(dir, name, 'run/monitor-state.json'))}\n[imds]\nendpoint = ${q(fabric.imdsUrl)}\n` +
        `[data_dir]\npath = ${q(join(dir, name, 'data'))}\n[log_path]\npath = ${q(join(dir, name, 'bootstate.log'))}\n` +
        `[telemetry]\nkvp_dir = ${q(join(dir, name, 'kvp'))}\n` +
        // Never on this host's own DHCP client, whatever its name does meanwhile.
        '[hostname_publishing]\nmonitor = false\n',
    );
    return file;
  };
  // The cycle's exchanges with bare node:http (bench/monitor-floor.cjs): what any agent posting the same
  // observations pays at least, beside Node's own start.
  const exchanges = [`http://127.0.0.1:${fabric.ports.hostPlugin}`, `${new URL(fabric.imdsUrl).origin}/metadata/instance?api-version=2018-02-01`, `http://127.0.0.1:${fabric.ports.wireserver}/HealthService`];
  const variants: Record<string, string[]> = { [NODE_E0.name]: NODE_E0.argv, [EXCHANGES]: [process.execPath, join(REPO, 'bench/monitor-floor.cjs'), ...exchanges] };
  for (const [index, build] of builds().entries()) variants[build.name] = [...build.argv, 'monitor', '--once', '--config', configFor(`b${index}`)];
  const runs = await runCycles(CYCLES, variants);
  const failed = runs.find((r) => r.code !== 0);
  if (failed) throw new Error(`${failed.name} exited with ${failed.code}: ${failed.stderr}`);

  const of = (name: string) => runs.filter((r) => r.name === name);
  const cpuMs = (r: Run) => (r.user_us + r.sys_us) / 1000;
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const floor = of(NODE_E0.name);
  const floorCpu = mean(floor.map(cpuMs));
  const exchangesCpu = mean(of(EXCHANGES).map(cpuMs));
  const rows: Row[] = [
    { metric: 'the cycle\'s HTTP exchanges alone, bare node:http (mean per cycle)', median: exchangesCpu, unit: 'ms', floor: floorCpu, floorName: NODE_E0.name, ratio: exchangesCpu / floorCpu, note: 'bench/monitor-floor.cjs: GET /health and the IMDS heartbeat, two HealthService POSTs' },
  ];
  for (const build of builds()) {
    const cycles = of(build.name);
    const cpu = mean(cycles.map(cpuMs));
    const wall = mean(cycles.map((r) => r.wall_ms));
    const peak = cycles.map((r) => r.maxrss_kib / 1024);
    const factor = Math.round(MINUTE_MS / wall);
    const simulated = `${cycles.length} cycles = ${Math.round((cycles.length / 60) * 10) / 10} h at one a minute, ×${factor}`;
    rows.push({ metric: `monitor cycle CPU, ${build.name}`, median: cpu, unit: 'ms', floor: floorCpu, floorName: NODE_E0.name, ratio: cpu / floorCpu, note: 'mean per cycle' });
    rows.push({ metric: `monitor cycle CPU, ${build.name} (floor: bench/monitor-floor.cjs)`, median: cpu, unit: 'ms', floor: exchangesCpu, floorName: EXCHANGES, ratio: cpu / exchangesCpu, note: 'mean per cycle' });
    rows.push({ metric: `monitor CPU averaged over a day, ${build.name}`, median: (cpu / MINUTE_MS) * 100, unit: '% of a core', floor: (floorCpu / MINUTE_MS) * 100, floorName: `${NODE_E0.name} a minute`, target: '≤ 0.2 %', note: simulated });
    rows.push({ metric: `monitor cycle peak RSS, ${build.name}`, median: median(peak), unit: 'MiB', floor: median(floor.map((r) => r.maxrss_kib / 1024)), floorName: NODE_E0.name });
    rows.push({ metric: `monitor RSS averaged over a day, ${build.name}`, median: mean(cycles.map((r) => ((r.maxrss_kib / 1024) * r.wall_ms) / MINUTE_MS)), unit: 'MiB', target: '≤ 30 MiB', note: 'peak × wall / 60 s: nothing stays resident between cycles' });
    rows.push({ metric: `monitor peak RSS growth per simulated hour, ${build.name}`, median: slope(peak) * 60, unit: 'MiB', note: 'least-squares slope of the cycles\' peaks' });
  }
  report('monitor-cycles', rows, CYCLES);
} finally {
  await fabric.close();
  rmSync(dir, { recursive: true, force: true });
}

/** Runs every variant `rounds` times, interleaved, each run in its own process, timed by the kernel (bench/cycle_rusage.py). */
function runCycles(rounds: number, variants: Record<string, string[]>): Promise<Run[]> {
  return new Promise((resolve, reject) => {
    const args = [join(REPO, 'bench/cycle_rusage.py'), String(rounds), ...Object.entries(variants).map(([name, argv]) => `${name}=${JSON.stringify(argv)}`)];
    // Asynchronous: the fake fabric answers from this process's event loop while the cycles run.
    const child = spawn('python3', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out.trim().split('\n').map((line) => JSON.parse(line) as Run)) : reject(new Error(`cycle_rusage.py exited with ${code}`))));
  });
}

/** Least-squares slope of `values` against their index. */
function slope(values: number[]): number {
  const n = values.length;
  const meanX = (n - 1) / 2;
  const meanY = values.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  values.forEach((y, x) => {
    num += (x - meanX) * (y - meanY);
    den += (x - meanX) ** 2;
  });
  return den === 0 ? 0 : num / den;
}
