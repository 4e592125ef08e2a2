/**
 * A day of the monitor on a booted Debian 12 (test/boot/): the .deb installed, bootstate-monitor.timer enabled with its
 * period shortened by a drop-in (BENCH_MONITOR_DAY_PERIOD, default 250ms, so one cycle stands for one minute), and the
 * fake fabric on Azure's addresses in the VM's network namespace. After the first boot has settled, it waits until
 * BENCH_MONITOR_DAY_CYCLES (default 1,440) more cycles have posted their heartbeat, counted from the requests the
 * fabric recorded, and reports per cycle:
 *   - the journal lines of the monitor's service (its own and PID 1's about it), of the timer, and of the whole VM;
 *   - the HealthService posts, and whether every heartbeat was healthy;
 *   - the CPU of the unit's cgroup (cpu.stat usage_usec, read by an ExecStopPost= the bench adds: the re-check of the
 *     firewall and the cycle itself, as the unit runs them);
 *   - the peak RSS of each cycle's `bootstate` process, as the kernel reports it when the process exits (taskstats,
 *     bench/exit_rusage.py): the cgroup's memory.peak would be the figure, but on a host with cgroup v1 controllers the
 *     container's cgroup v2 tree has no memory controller (so the unit's MemoryMax= is not enforced there either);
 *   - the size of the roll-up state file and of bootstate's log file, at the start and at the end of the day.
 * A cycle that takes longer than the period is followed by the next at once (the timer waits for the unit to end), so
 * the time factor is 60 s / the mean interval between cycles, reported with the rows. Needs what the boot tests need.
 *
 *   node --import tsx bench/monitor-booted-day.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Observation } from '../src/azure/healthservice.js';
import { canSandbox } from '../test/e2e/ns.js';
import { agentEnded, createMachine, journal, type Boot, type Machine } from '../test/boot/machine.js';
import { configLayer, createRig, imdsDocument, monitorHeartbeats, monitorTimerLayer, untilMonitorHeartbeats, type Rig } from '../test/boot/scenario.js';
import { type Row, REPO, median, report } from './harness.js';

const CYCLES = Number(process.env.BENCH_MONITOR_DAY_CYCLES ?? 1440);
const PERIOD = process.env.BENCH_MONITOR_DAY_PERIOD ?? '250ms';
/** Generous for a loaded 2-core machine: the bench fails rather than report a day it did not run. */
const DEADLINE_MS = Number(process.env.BENCH_MONITOR_DAY_DEADLINE_MS ?? 30 * 60_000);
const MINUTE_MS = 60_000;
const RECORD = '/run/bench-monitor-cycles';

if (!canSandbox) {
  report('monitor-booted-day', [{ metric: 'not run: needs root on Linux', median: Number.NaN, unit: '' }], 1);
  process.exit(0);
}

/** Runs after each cycle in the unit's cgroup, outside its sandbox: what the cgroup used, and how the cycle ended. */
const RECORDER = `#!/bin/sh
cgroup=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "$(sed -n 's/^usage_usec //p' "$cgroup/cpu.stat") $SERVICE_RESULT $EXIT_STATUS" >> ${RECORD}
`;

interface Snapshot {
  at: number;
  heartbeats: Observation[];
  healthPosts: number;
  requests: number;
  monitorLines: number;
  timerLines: number;
  allLines: number;
  records: number;
  exits: number;
  stateBytes: number;
  logBytes: number;
}

const rig: Rig = await createRig();
let machine: Machine | undefined;
let boot: Boot | undefined;
let watcher: ChildProcess | undefined;
/** Each cycle's `bootstate` process as it exited (bench/exit_rusage.py). */
const exits: Array<{ elapsed_us: number; hiwater_rss_kib: number }> = [];
let overruns = 0;
try {
  const recorder = path.join(rig.workDir, 'recorder-layer');
  await mkdir(path.join(recorder, 'usr/local/libexec'), { recursive: true });
  await writeFile(path.join(recorder, 'usr/local/libexec/bench-monitor-cycle'), RECORDER, { mode: 0o755 });
  const timer = await monitorTimerLayer(rig, 'day', PERIOD, '[Service]\nExecStopPost=+/usr/local/libexec/bench-monitor-cycle\n');
  const config = await configLayer(rig, 'monitor', '[monitor]\nrequest_timeout_secs = 5\n');
  machine = await createMachine({
    name: `bsmd${process.pid}`,
    workDir: rig.workDir,
    layers: [config, timer, recorder, rig.debLayer, rig.debian],
    imdsDocument: imdsDocument(rig.publicKey),
  });
  boot = await machine.boot();
  watcher = await watchExits(boot.pid);
  await boot.settled();
  await agentEnded(boot);
  const vm = { machine, boot };

  // The day starts after the first cycles: the state file exists, /versions has been asked.
  await untilMonitorHeartbeats(machine, boot, monitorHeartbeats(await machine.requests()).length + 2);
  const start = await snapshot(vm);
  await untilMonitorHeartbeats(machine, boot, start.heartbeats.length + CYCLES, DEADLINE_MS);
  const end = await snapshot(vm);
  const lines = (await boot.exec(['cat', RECORD])).stdout.trim().split('\n');
  const cycleExits = exits.slice(start.exits, end.exits);
  const cycleRecords = lines.slice(start.records, end.records).map((line) => {
    const [usage, result, status] = line.split(' ');
    return { cpuMs: Number(usage) / 1000, result, status };
  });
  const dayLines = (await journal(boot, ['-b'])).slice(start.allLines, end.allLines);
  const unitResult = (await boot.exec(['systemctl', 'show', 'bootstate-monitor.service', '-p', 'Result', '--value'])).stdout.trim();
  report('monitor-booted-day', rows(start, end, cycleRecords, cycleExits, commonest(dayLines), unitResult), end.heartbeats.length - start.heartbeats.length);
} finally {
  watcher?.kill();
  await boot?.shutdown().catch(() => undefined);
  await machine?.destroy().catch(() => undefined);
  await rig.cleanup();
}

function rows(
  start: Snapshot,
  end: Snapshot,
  cycleRecords: Array<{ cpuMs: number; result: string; status: string }>,
  cycleExits: typeof exits,
  lines: string,
  unitResult: string,
): Row[] {
  const cycles = end.heartbeats.length - start.heartbeats.length;
  const per = (a: number, b: number) => (b - a) / cycles;
  const intervalMs = (end.at - start.at) / cycles;
  const day = `${cycles} cycles, one standing for a minute: ×${Math.round(MINUTE_MS / intervalMs)} (timer period ${PERIOD}, a cycle every ${Math.round(intervalMs)} ms)`;
  const beats = end.heartbeats.slice(start.heartbeats.length);
  const unhealthy = beats.filter((o) => !o.IsHealthy).length;
  const failed = cycleRecords.filter((r) => r.result !== 'success').length;
  const cpu = cycleRecords.map((r) => r.cpuMs);
  const peaks = cycleExits.map((e) => e.hiwater_rss_kib / 1024);
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const half = Math.floor(peaks.length / 2);
  return [
    { metric: 'monitor cycles run on a booted Debian 12 (heartbeats the fabric received)', median: cycles, unit: 'cycles', note: day },
    { metric: 'wall time of the day', median: (end.at - start.at) / 1000, unit: 's' },
    { metric: 'journal lines per cycle, bootstate-monitor.service (its own and systemd\'s about it)', median: per(start.monitorLines, end.monitorLines), unit: 'lines', target: '0' },
    { metric: 'journal lines per cycle, bootstate-monitor.timer', median: per(start.timerLines, end.timerLines), unit: 'lines' },
    { metric: 'journal lines per cycle, the whole VM', median: per(start.allLines, end.allLines), unit: 'lines', note: lines || undefined },
    { metric: 'HealthService posts per cycle', median: per(start.healthPosts, end.healthPosts), unit: 'posts' },
    { metric: 'fabric requests per cycle (HealthService, host plugin, IMDS)', median: per(start.requests, end.requests), unit: 'requests' },
    { metric: 'unhealthy heartbeats over the day', median: unhealthy, unit: `of ${beats.length}`, target: '0' },
    {
      metric: 'cycles the unit did not end with success',
      median: failed,
      unit: `of ${cycleRecords.length}`,
      target: '0',
      note: `${cycleRecords.filter((r) => r.status !== '0').length} exited non-zero (1: a check or a post failed); last Result=${unitResult}`,
    },
    { metric: 'unit CPU per cycle (cgroup usage_usec: firewall re-check + monitor --once)', median: mean(cpu), unit: 'ms', note: `mean; median ${median(cpu).toFixed(0)} ms` },
    { metric: 'unit CPU averaged over a day at one cycle a minute', median: (mean(cpu) / MINUTE_MS) * 100, unit: '% of a core', target: '≤ 0.2 %' },
    { metric: 'peak RSS of a cycle\'s bootstate process (taskstats at exit)', median: median(peaks), unit: 'MiB', note: `median of ${peaks.length}; max ${Math.max(...peaks).toFixed(1)} MiB${overruns ? `; ${overruns} kernel buffer overruns` : ''}` },
    { metric: 'RSS averaged over a day at one cycle a minute', median: mean(cycleExits.map((e) => (e.hiwater_rss_kib / 1024) * (e.elapsed_us / 1000 / MINUTE_MS))), unit: 'MiB', target: '≤ 30 MiB', note: 'peak × the process\'s run time / 60 s' },
    { metric: 'peak RSS, second half of the day − first half (medians)', median: median(peaks.slice(half)) - median(peaks.slice(0, half)), unit: 'MiB' },
    { metric: '/run/bootstate/monitor-state.json at the end of the day', median: end.stateBytes, unit: 'bytes', note: `${start.stateBytes} at its start` },
    { metric: 'bootstate\'s log file growth per cycle', median: per(start.logBytes, end.logBytes), unit: 'bytes', note: `${end.logBytes} bytes at the end` },
  ];
}

/** The day's journal lines by what they say (numbers left out), commonest first, with their counts. */
function commonest(entries: Array<Record<string, string>>): string {
  const counts = new Map<string, number>();
  for (const entry of entries) {
    const key = `${entry.SYSLOG_IDENTIFIER ?? entry._COMM}: ${String(entry.MESSAGE).replace(/\d+/g, 'N')}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const sorted = [...counts].sort((a, b) => b[1] - a[1]);
  for (const [line, n] of sorted) process.stderr.write(`monitor-booted-day: journal: ${n} × ${line}\n`);
  return sorted.slice(0, 3).map(([line, n]) => `${n} × "${line.replaceAll('|', '/')}"`).join(', ');
}

async function snapshot({ machine, boot }: { machine: Machine; boot: Boot }): Promise<Snapshot> {
  const at = performance.now();
  const requests = await machine.requests();
  const size = async (file: string) => Number((await boot.exec(['stat', '-c', '%s', file])).stdout.trim() || Number.NaN);
  const records = (await boot.exec(['sh', '-c', `cat ${RECORD} 2>/dev/null | wc -l`])).stdout.trim();
  return {
    at,
    heartbeats: monitorHeartbeats(requests),
    healthPosts: requests.filter((r) => r.route === 'healthService').length,
    requests: requests.length,
    monitorLines: (await journal(boot, ['-b', '-u', 'bootstate-monitor.service'])).length,
    timerLines: (await journal(boot, ['-b', '-u', 'bootstate-monitor.timer'])).length,
    allLines: (await journal(boot, ['-b'])).length,
    records: Number(records),
    exits: exits.length,
    stateBytes: await size('/run/bootstate/monitor-state.json'),
    logBytes: await size('/var/log/bootstate.log'),
  };
}

/** Starts bench/exit_rusage.py for the processes named bootstate that the VM's PID 1 starts; resolves once it listens. */
function watchExits(pid1: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [path.join(REPO, 'bench/exit_rusage.py'), String(pid1), 'bootstate'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buffered = '';
    child.on('error', reject);
    child.on('exit', (code, signal) => reject(new Error(`bench/exit_rusage.py exited with ${code ?? signal}`)));
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        const event = JSON.parse(line) as { ready?: boolean; overrun?: boolean; elapsed_us: number; hiwater_rss_kib: number };
        if (event.ready) resolve(child);
        else if (event.overrun) overruns++;
        else exits.push(event);
      }
    });
  });
}
