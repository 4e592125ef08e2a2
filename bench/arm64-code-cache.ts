/**
 * What the arm64 executable's V8 code caches save, under qemu emulation: the executable is built twice for arm64
 * (scripts/build/binary.mjs --arch arm64, with the caches its node wrote under qemu-user, and --no-code-cache), and
 * each runs under qemu-aarch64-static, interleaved: `--version`, and a provisioning run with the scratch backend
 * against the fake fabric on loopback (spawn → first IMDS request, → Ready, → exit), wall and CPU time (user +
 * system, from the shell's `times`, which load on the machine moves less). Emulated figures: qemu translates each
 * arm64 instruction it meets, so compiling a script costs more here than on an arm64 CPU, and the saving is larger.
 *
 *   node --import tsx bench/arm64-code-cache.ts        (BENCH_RUNS=N to change the repetitions; default 5)
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Build, type Row, REPO, interleave, median, report, startFabric, timeProvisioning } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const QEMU = ['qemu-aarch64-static', '-L', '/usr/aarch64-linux-gnu'];
// The command runs as the shell's child; `times` then prints the shell's CPU time and its children's.
const TIMED = '"$@"; status=$?; times >&2; exit $status';

/** Builds the arm64 executable into a directory of its own, with or without code caches; returns its path. */
function build(dir: string, caches: boolean): string {
  execFileSync(process.execPath, [join(REPO, 'scripts/build/binary.mjs'), '--arch', 'arm64', ...(caches ? [] : ['--no-code-cache'])], {
    cwd: REPO,
    env: { ...process.env, BOOTSTATE_DIST: dir },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return join(dir, 'bootstate');
}

/** The children's user + system seconds from the last `times` output in `stderr`, in ms. */
function cpuMs(stderr: string): number {
  const lines = stderr.trim().split('\n');
  const match = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(lines[lines.length - 1] ?? '');
  if (!match) throw new Error(`no CPU times in: ${stderr.slice(-500)}`);
  return (Number(match[1]) * 60 + Number(match[2]) + Number(match[3]) * 60 + Number(match[4])) * 1000;
}

/** `argv` run to its exit: wall ms and CPU ms; rejects on a non-zero exit. */
function timeRun(argv: string[]): Promise<{ wall: number; cpu: number }> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn('sh', ['-c', TIMED, 'timed', ...argv], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => {
      const wall = performance.now() - start;
      if (code === 0) resolve({ wall, cpu: cpuMs(stderr) });
      else reject(new Error(`${argv.join(' ')} exited ${code}: ${stderr.slice(-1000)}`));
    });
  });
}

const work = mkdtempSync(join(tmpdir(), 'bootstate-arm64-cache-'));
const fabric = await startFabric();
try {
  const executables = { cached: build(join(work, 'cached'), true), uncached: build(join(work, 'uncached'), false) };
  type Sample = { wall: number; cpu: number; firstImds?: number; ready?: number };
  const variants: Record<string, () => Promise<Sample>> = {};
  for (const [name, executable] of Object.entries(executables)) {
    variants[`version:${name}`] = () => timeRun([...QEMU, executable, '--version']);
    const timed: Build = { name, argv: ['sh', '-c', TIMED, 'timed', ...QEMU, executable] };
    variants[`provision:${name}`] = async () => {
      const t = await timeProvisioning(timed, fabric);
      return { wall: t.exit, cpu: cpuMs(t.stderr), firstImds: t.firstImds, ready: t.ready };
    };
  }
  const samples = await interleave(variants, RUNS);
  const rows: Row[] = [];
  const pick = (key: string, field: keyof Sample) => samples[key]!.map((s) => s[field]!);
  const row = (metric: string, key: string, field: keyof Sample): Row => {
    const withCache = median(pick(`${key}:cached`, field));
    const without = median(pick(`${key}:uncached`, field));
    return { metric: `${metric}, under qemu emulation`, median: withCache, unit: 'ms', floor: without, floorName: 'without caches', ratio: withCache / without, note: `saves ${Math.round(without - withCache)} ms` };
  };
  rows.push(row('`bootstate --version`, wall', 'version', 'wall'), row('`bootstate --version`, CPU', 'version', 'cpu'));
  rows.push(row('provisioning: first IMDS request', 'provision', 'firstImds'), row('provisioning: Ready', 'provision', 'ready'));
  rows.push(row('provisioning: exit, wall', 'provision', 'wall'), row('provisioning: CPU', 'provision', 'cpu'));
  report('arm64-code-cache', rows, RUNS);
} finally {
  await fabric.close();
  rmSync(work, { recursive: true, force: true });
}
