/**
 * Time to Ready with the real backend: the agent runs inside the namespace sandbox of test/e2e/ns.ts (its own
 * /etc, /home, /var/lib, hostname) and really runs useradd, chpasswd, hostname, sshd … against a loopback
 * fabric. The floor runs in an identical fresh sandbox: bench/floor-client.mjs making the two unavoidable round
 * trips with the same OS commands executed bare in between. The commands are the ones the agent ran, captured
 * with strace in the warm-up run, minus `flock` (KVP telemetry locking, not provisioning work). Needs root and
 * strace; otherwise it reports why it did not run. Target: ≤ 1.3 × floor.
 *
 * The second comparison is the one a VM owner sees: spawn → Ready arrived *and* the process exited, against
 * bench/minimal_agent.py, a straight-line Python agent doing the same job (IMDS GET, useradd, passwd -l, keys,
 * sshd drop-in, hostname, Ready POST) in an identical fresh sandbox. Target: ≤ 1.0 × the Python agent.
 *
 *   node --import tsx bench/time-to-ready-sandbox.ts
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { canSandbox, createSandbox, runInSandbox } from '../test/e2e/ns.js';
import { type Build, type Fabric, REPO, RUNS, type Row, builds, interleave, report, startFabric, versus } from './harness.js';

const NOT_PROVISIONING = new Set(['flock']);

if (!canSandbox || spawnSync('strace', ['-V']).status !== 0) {
  report('time-to-ready-sandbox', [{ metric: 'not run: needs root on Linux and strace', median: Number.NaN, unit: 'ms' }]);
  process.exit(0);
}

const work = mkdtempSync(join(tmpdir(), 'bootstate-bench-sandbox-'));
const fabric = await startFabric();

interface SandboxTiming {
  ready: number;
  exit: number;
}

/** Spawn → Ready arrival and spawn → exit for `argv` run inside a fresh sandbox, built and removed untimed. */
async function timeInSandbox(argv: string[], label: string): Promise<SandboxTiming> {
  const sandbox = await createSandbox({ hostname: 'bench' });
  try {
    const ready = fabric.expect('health', '"Ready"');
    const start = performance.now();
    const result = runInSandbox(sandbox, argv, { cwd: REPO, timeoutMs: 120_000, env: { BOOTSTATE_LOG: 'error' } });
    const outcome = await Promise.race([ready.then((arrival) => ({ arrival })), result.then((r) => ({ r }))]);
    const finished = await result;
    const exit = performance.now() - start;
    if (!('arrival' in outcome) || finished.exitCode !== 0) {
      throw new Error(`${label}: exited ${finished.exitCode} without Ready: ${finished.stderr.slice(-1500)}`);
    }
    return { ready: outcome.arrival.at - start, exit };
  } finally {
    await sandbox.cleanup();
  }
}

function configFor(f: Fabric): string {
  const file = join(work, 'bench.toml');
  writeFileSync(file, `[imds]\nendpoint = ${JSON.stringify(f.imdsUrl)}\n\n[wireserver]\nhealth_endpoint = ${JSON.stringify(f.healthUrl)}\n`);
  return file;
}

/** The commands one real provisioning executes, from an strace of a warm-up run. */
async function captureCommands(build: Build, config: string): Promise<string[][]> {
  const trace = join(work, 'execve.trace');
  await timeInSandbox(['strace', '-f', '-qq', '-v', '-s', '65535', '-e', 'trace=execve', '-o', trace, ...build.argv, 'provision', '--config', config], 'strace');
  const commands: string[][] = [];
  // Two processes exec'ing at once split a call: `PID execve(…) <unfinished ...>`, then `PID <... execve resumed>) = 0`.
  const unfinished = new Map<string, RegExpExecArray>();
  for (const line of readFileSync(trace, 'utf8').split('\n').slice(1)) {
    const pid = /^(\d+) /.exec(line)?.[1] ?? '';
    let match = /execve\("([^"]+)", (\[.*?\]), .*\) = 0$/.exec(line);
    const started = /execve\("([^"]+)", (\[.*?\]), .*<unfinished \.\.\.>$/.exec(line);
    if (started) unfinished.set(pid, started);
    if (/<\.\.\. execve resumed>.*\) = 0$/.test(line)) match = unfinished.get(pid) ?? null;
    if (!match) continue;
    const argv = JSON.parse(match[2]) as string[];
    if (!NOT_PROVISIONING.has(basename(match[1]))) commands.push([match[1], ...argv.slice(1)]);
  }
  return commands;
}

try {
  const config = configFor(fabric);
  const all = builds();
  const commands = await captureCommands(all[0], config);
  const commandsFile = join(work, 'commands.json');
  writeFileSync(commandsFile, JSON.stringify(commands));
  const floorArgv = [process.execPath, join(REPO, 'bench/floor-client.mjs'), fabric.imdsUrl, fabric.healthUrl, commandsFile];

  const pythonArgv = ['python3', join(REPO, 'bench/minimal_agent.py'), fabric.imdsUrl, fabric.healthUrl];
  const variants: Record<string, () => Promise<SandboxTiming>> = {
    floor: () => timeInSandbox(floorArgv, 'floor'),
    python: () => timeInSandbox(pythonArgv, 'python'),
  };
  for (const build of all) variants[build.name] = () => timeInSandbox([...build.argv, 'provision', '--config', config], build.name);
  const samples = await interleave(variants, Math.min(RUNS, 10));
  const commandList = commands.map((argv) => basename(argv[0])).join(', ');
  const ready = (name: string) => samples[name].map((t) => t.ready);
  const exit = (name: string) => samples[name].map((t) => t.exit);
  const rows: Row[] = all.flatMap((build) => [
    versus(`time to Ready and exit (real backend, sandbox), ${build.name}`, exit(build.name), 'minimal Python agent (bench/minimal_agent.py)', exit('python'), {
      target: '≤ 1.0',
    }),
    versus(`time to Ready (real backend, sandbox), ${build.name}`, ready(build.name), 'node + IMDS GET + same commands + Ready POST', ready('floor'), {
      target: '≤ 1.3',
      note: `commands: ${commandList}`,
    }),
  ]);
  report('time-to-ready-sandbox', rows);
} finally {
  await fabric.close();
  rmSync(work, { recursive: true, force: true });
}
