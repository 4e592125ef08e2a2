/**
 * Time to Ready with the real backend: the agent runs inside the namespace sandbox of test/e2e/ns.ts (its own
 * /etc, /home, /var/lib, hostname) and really runs useradd, chpasswd, hostname, sshd … against a loopback
 * fabric. The floor runs in an identical fresh sandbox: bench/floor-client.mjs making the two unavoidable round
 * trips with the same OS commands executed bare in between. The commands are the ones the agent ran, captured
 * with strace in the warm-up run, minus `flock` (KVP telemetry locking, not provisioning work). Needs root and
 * strace; otherwise it reports why it did not run. Target: ≤ 1.3 × floor.
 *
 * The second comparison is the one a VM owner sees: start → Ready arrived *and* the process exited, against
 * bench/minimal_agent.py, a straight-line Python agent doing the same job (IMDS GET, useradd, passwd -l, keys,
 * sshd drop-in, hostname, new SSH host keys of the same three types, Ready POST) in an identical fresh sandbox.
 * Target: ≤ 1.0 × the Python agent. Beside it, what that costs the machine: the CPU time (user + system) of the
 * whole process tree, the agent and every command it ran (target ≤ 1.2 × the Python agent), and the peak RSS of
 * its largest process (target ≤ 60 MiB). Both agents run with their defaults but for the fabric's address; the
 * same comparison without host keys (bootstate `host_keys.regenerate = false`, the Python agent
 * `--keep-host-keys`) shows the agents' own cost apart from ssh-keygen's, whose RSA prime search varies widely
 * from run to run.
 *
 * Each command runs under bench/process_tree.py inside the sandbox, which waits for the whole tree and reads its
 * rusage; times start at its fork of the command, so neither the sandbox's entry nor the wrapper's own start is
 * in them. Python is the interpreter itself (sys.executable), never a version manager's shim: pyenv's starts an
 * interpreter of its own first, whose CPU would be counted to the Python agent.
 *
 *   node --import tsx bench/time-to-ready-sandbox.ts
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { canSandbox, createSandbox, runInSandbox } from '../test/e2e/ns.js';
import { type Build, type Fabric, REPO, RUNS, type Row, builds, interleave, median, report, startFabric, versus } from './harness.js';

const NOT_PROVISIONING = new Set(['flock']);

if (!canSandbox || spawnSync('strace', ['-V']).status !== 0) {
  report('time-to-ready-sandbox', [{ metric: 'not run: needs root on Linux and strace', median: Number.NaN, unit: 'ms' }]);
  process.exit(0);
}

const loadAtStart = loadavg();
const work = mkdtempSync(join(tmpdir(), 'bootstate-bench-sandbox-'));
const fabric = await startFabric();

interface SandboxTiming {
  /** Start → the Ready POST arrived, ms. */
  ready: number;
  /** Start → the command exited, ms. */
  exit: number;
  /** User + system CPU time of the command's whole process tree, ms. */
  cpu: number;
  /** Peak RSS of the tree's largest process, MiB. */
  rssMiB: number;
}

/**
 * The Python interpreter the sandbox can run, itself and not a shim (pyenv's is a bash script, which would add its
 * own start to every Python run): the one `python3` on PATH runs if the sandbox sees it, else the system's. The
 * sandbox mounts its own tree over /root, /home, /etc and more (test/e2e/ns.ts), so an interpreter installed under
 * one of those (pyenv's, under /root) is not there: each candidate is tried inside a sandbox, and none is an error.
 */
async function sandboxPython(): Promise<string> {
  const resolved = (command: string) => spawnSync(command, ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout?.trim() || '';
  const candidates = [...new Set(['python3', '/usr/bin/python3', '/usr/local/bin/python3'].map(resolved).filter(Boolean))];
  const sandbox = await createSandbox({ hostname: 'bench' });
  try {
    for (const candidate of candidates) {
      const probe = await runInSandbox(sandbox, [candidate, '-S', '-E', '-c', 'import ctypes, glob, json, os, pwd, resource, subprocess, sys, time, urllib.request'], { timeoutMs: 30_000 });
      if (probe.exitCode === 0) return candidate;
    }
  } finally {
    await sandbox.cleanup();
  }
  throw new Error(`no Python interpreter runs in the sandbox (tried: ${candidates.join(', ') || 'none found on this host'})`);
}

const PYTHON = await sandboxPython();
/** CLOCK_MONOTONIC ms at performance.now() = 0: the clock bench/process_tree.py's times are on. */
const monotonicOrigin = () => Number(process.hrtime.bigint()) / 1e6 - performance.now();

let runsDone = 0;

/** Ready arrival, exit, CPU and peak RSS of `argv` run inside a fresh sandbox, built and removed untimed. */
async function timeInSandbox(argv: string[], label: string): Promise<SandboxTiming> {
  const sandbox = await createSandbox({ hostname: 'bench' });
  const usageFile = join(work, `usage-${runsDone++}.json`);
  try {
    const ready = fabric.expect('health', '"Ready"');
    const wrapped = [PYTHON, '-S', '-E', join(REPO, 'bench/process_tree.py'), usageFile, ...argv];
    const result = runInSandbox(sandbox, wrapped, { cwd: REPO, timeoutMs: 120_000, env: { BOOTSTATE_LOG: 'error' } });
    const outcome = await Promise.race([ready.then((arrival) => ({ arrival })), result.then((r) => ({ r }))]);
    const finished = await result;
    if (!('arrival' in outcome) || finished.exitCode !== 0) {
      throw new Error(`${label}: exited ${finished.exitCode} without Ready: ${finished.stderr.slice(-1500)}`);
    }
    const usage = JSON.parse(readFileSync(usageFile, 'utf8')) as { start: number; exit: number; user_ms: number; sys_ms: number; maxrss_kib: number };
    const start = usage.start / 1e6 - monotonicOrigin();
    return { ready: outcome.arrival.at - start, exit: (usage.exit - usage.start) / 1e6, cpu: usage.user_ms + usage.sys_ms, rssMiB: usage.maxrss_kib / 1024 };
  } finally {
    rmSync(usageFile, { force: true });
    await sandbox.cleanup();
  }
}

function configFor(f: Fabric, extra = '', name = 'bench.toml'): string {
  const file = join(work, name);
  writeFileSync(file, `[imds]\nendpoint = ${JSON.stringify(f.imdsUrl)}\n\n[wireserver]\nhealth_endpoint = ${JSON.stringify(f.healthUrl)}\n${extra}`);
  return file;
}

/** The commands one real provisioning executes, from an strace of a warm-up run. */
async function captureCommands(build: Build, config: string): Promise<string[][]> {
  const trace = join(work, 'execve.trace');
  await timeInSandbox(['strace', '-f', '-qq', '-v', '-s', '65535', '-e', 'trace=execve', '-o', trace, ...build.argv, 'provision', '--config', config], 'strace');
  const commands: string[][] = [];
  // Two processes exec'ing at once split a call: `PID execve(…) <unfinished ...>`, then `PID <... execve resumed>) = 0`,
  // where strace pads the short line to align its `= 0`.
  const unfinished = new Map<string, RegExpExecArray>();
  for (const line of readFileSync(trace, 'utf8').split('\n').slice(1)) {
    const pid = /^(\d+) /.exec(line)?.[1] ?? '';
    let match = /execve\("([^"]+)", (\[.*?\]), .*\)\s+= 0$/.exec(line);
    const started = /execve\("([^"]+)", (\[.*?\]), .*<unfinished \.\.\.>$/.exec(line);
    if (started) unfinished.set(pid, started);
    if (/<\.\.\. execve resumed>.*\)\s+= 0$/.test(line)) match = unfinished.get(pid) ?? null;
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
  // The same without the host keys' ssh-keygen runs: what any Node agent doing this job costs at least, beside the
  // Python agent's --keep-host-keys run.
  const commandsNoKeysFile = join(work, 'commands-no-host-keys.json');
  writeFileSync(commandsNoKeysFile, JSON.stringify(commands.filter((argv) => basename(argv[0]) !== 'ssh-keygen')));
  const floorNoKeysArgv = [process.execPath, join(REPO, 'bench/floor-client.mjs'), fabric.imdsUrl, fabric.healthUrl, commandsNoKeysFile];

  const noHostKeys = configFor(fabric, '\n[host_keys]\nregenerate = false\n', 'bench-no-host-keys.toml');
  const pythonArgv = [PYTHON, join(REPO, 'bench/minimal_agent.py'), fabric.imdsUrl, fabric.healthUrl];
  const variants: Record<string, () => Promise<SandboxTiming>> = {
    floor: () => timeInSandbox(floorArgv, 'floor'),
    'floor, no host keys': () => timeInSandbox(floorNoKeysArgv, 'floor, no host keys'),
    python: () => timeInSandbox(pythonArgv, 'python'),
    'python, no host keys': () => timeInSandbox([...pythonArgv, '--keep-host-keys'], 'python, no host keys'),
  };
  for (const build of all) {
    variants[build.name] = () => timeInSandbox([...build.argv, 'provision', '--config', config], build.name);
    variants[`${build.name}, no host keys`] = () => timeInSandbox([...build.argv, 'provision', '--config', noHostKeys], `${build.name}, no host keys`);
  }
  // ssh-keygen's RSA prime search takes a random time: many runs, so its dice weigh less on the medians.
  const samples = await interleave(variants, RUNS);
  const commandList = commands.map((argv) => basename(argv[0])).join(', ');
  const of = (name: string, field: keyof SandboxTiming) => samples[name].map((t) => t[field]);
  const PYTHON_AGENT = 'minimal Python agent (bench/minimal_agent.py)';
  const rows: Row[] = all.flatMap((build) => [
    versus(`time to Ready and exit (real backend, sandbox), ${build.name}`, of(build.name, 'exit'), PYTHON_AGENT, of('python', 'exit'), {
      target: '≤ 1.0',
    }),
    versus(`CPU to Ready and exit (user+sys of the process tree, sandbox), ${build.name}`, of(build.name, 'cpu'), PYTHON_AGENT, of('python', 'cpu'), {
      target: '≤ 1.2',
      note: 'both replace the host keys: rsa, ecdsa, ed25519',
    }),
    versus(`time to Ready and exit without host keys, ${build.name}`, of(`${build.name}, no host keys`, 'exit'), `${PYTHON_AGENT}, --keep-host-keys`, of('python, no host keys', 'exit'), {
      note: 'host_keys.regenerate = false',
    }),
    versus(`CPU to Ready and exit without host keys, ${build.name}`, of(`${build.name}, no host keys`, 'cpu'), `${PYTHON_AGENT}, --keep-host-keys`, of('python, no host keys', 'cpu'), {
      note: 'host_keys.regenerate = false',
    }),
    versus(`peak RSS (largest process, sandbox), ${build.name}`, of(build.name, 'rssMiB'), PYTHON_AGENT, of('python', 'rssMiB'), {
      unit: 'MiB',
      target: '≤ 60 MiB',
    }),
    versus(`time to Ready (real backend, sandbox), ${build.name}`, of(build.name, 'ready'), 'node + IMDS GET + same commands + Ready POST', of('floor', 'ready'), {
      target: '≤ 1.3',
      note: `commands: ${commandList}`,
    }),
  ]);
  // What the Python agent's figure leaves a Node agent: node:http's two round trips and the same commands, bare.
  rows.push(
    versus('CPU to Ready and exit, node making the same commands bare (bench/floor-client.mjs)', of('floor', 'cpu'), PYTHON_AGENT, of('python', 'cpu'), {
      note: 'the least any Node agent doing this job costs; both replace the host keys',
    }),
    versus('CPU to Ready and exit without host keys, node making the same commands bare (bench/floor-client.mjs)', of('floor, no host keys', 'cpu'), `${PYTHON_AGENT}, --keep-host-keys`, of('python, no host keys', 'cpu'), {
      note: `commands: ${commands.filter((argv) => basename(argv[0]) !== 'ssh-keygen').map((argv) => basename(argv[0])).join(', ')}`,
    }),
  );
  process.stderr.write(`time-to-ready-sandbox: load average ${loadAtStart.map((l) => l.toFixed(2)).join(' ')} at the start, ${loadavg().map((l) => l.toFixed(2)).join(' ')} at the end; CPU medians: ${Object.keys(samples).map((n) => `${n} ${median(of(n, 'cpu')).toFixed(0)} ms`).join(', ')}\n`);
  report('time-to-ready-sandbox', rows);
} finally {
  await fabric.close();
  rmSync(work, { recursive: true, force: true });
}
