/**
 * Mutation check of the statecharts (`npm run mutate`): every single-transition mutant of machines/provisioning.ts,
 * machines/monitor.ts and machines/report.ts (retarget, guard negated or dropped, action dropped — enumerated from
 * whatever the charts contain) is built in memory and played, in worker processes, on the paths of that chart's
 * checks (test/mutation/charts.ts): paths that do not depend on the chart first, each step compared with the oracle,
 * stopping at the first difference; the mutant's own model paths only when none kills it (test/mutation/verdict.ts).
 * The real chart is played on every one of those paths first: this is the full oracle walk `npm test` leaves out.
 * Prints killed / total, every survivor with what it means, the equivalent mutants with their
 * argument, and writes the summary into docs/reliability.md and the kill-set (for each killed mutant the path that
 * killed it first; `npm test` plays those) into test/mutation/kill-set.json. Exits 1 if a non-equivalent mutant survives.
 *
 *   npm run mutate                         all mutants, 2 workers; records the kill-set and docs/reliability.md
 *   npm run mutate -- --chart monitor      one chart
 *   npm run mutate -- --sample 12          every n-th mutant of each chart (what CI runs)
 *   npm run mutate -- --jobs 1 --no-write
 *   npm run mutate -- --sample 12 --kill-set /tmp/k.json   the (partial) kill-set of a sample, written elsewhere
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { CHARTS, type Chart } from '../test/mutation/charts.js';
import { equivalence } from '../test/mutation/equivalent.js';
import { mutantsOf, type Mutant } from '../test/mutation/mutants.js';
import { Judge } from '../test/mutation/verdict.js';
import { KILL_SET_FILE, killSetOf, recordedKillers, writeKillSet } from '../test/mutation/kill-set.js';

interface Job {
  chart: string;
  id: string;
}
interface Outcome extends Job {
  killed: boolean;
  by?: string;
  /** The fixed path that killed it (the kill-set's unit). */
  path?: { id: string; name: string };
  ms: number;
  played?: number;
  /** The real chart disagrees with its oracle: no verdict means anything. */
  broken?: string;
}

/** A worker that starts no path for this long is stuck in a mutant's endless loop (the real chart's paths take milliseconds). */
const STALL_MS = 30_000;
/** Generating a chart's paths (or a mutant's own) takes seconds of CPU, minutes on a machine shared with other work. */
const BUSY_MS = 20 * 60_000;
const args = process.argv.slice(2);
const option = (name: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};

async function main() {
  const only = option('chart');
  const sample = Number(option('sample') ?? 1);
  const jobs = Number(option('jobs') ?? Math.min(2, cpus().length));
  const write = !args.includes('--no-write') && sample === 1 && !only;

  const all: Array<{ chart: string; mutant: Mutant }> = [];
  for (const chart of CHARTS) {
    if (only && chart.name !== only) continue;
    mutantsOf(chart.machine).forEach((mutant, i) => {
      if (i % sample === 0) all.push({ chart: chart.name, mutant });
    });
  }
  const started = Date.now();
  console.log(`${all.length} mutants of ${[...new Set(all.map((a) => a.chart))].join(', ')}; ${jobs} workers`);
  const outcomes = await runAll(all.map(({ chart, mutant }) => ({ chart, id: mutant.id })), jobs);
  const seconds = Math.round((Date.now() - started) / 1000);
  // Each worker first checks the real chart on every path: if it disagrees, every mutant would count as killed.
  const broken = outcomes.find((o) => o.broken);
  if (broken) {
    console.error(broken.broken);
    process.exit(2);
  }
  mkdirSync('test-output', { recursive: true });
  writeFileSync('test-output/mutation.json', JSON.stringify({ seconds, jobs, outcomes }, null, 1));

  const byId = new Map(all.map((a) => [`${a.chart}\u0000${a.mutant.id}`, a]));
  const lines: string[] = [];
  const summary: string[] = [];
  for (const chart of CHARTS) {
    const mine = outcomes.filter((o) => o.chart === chart.name);
    if (!mine.length) continue;
    const killed = mine.filter((o) => o.killed);
    const survivors = mine.filter((o) => !o.killed).map((o) => ({ o, m: byId.get(`${o.chart}\u0000${o.id}`)!.mutant }));
    const equivalent = survivors.filter(({ m }) => equivalence(chart.name, m) !== null);
    const holes = survivors.filter(({ m }) => equivalence(chart.name, m) === null);
    const nonEquivalent = mine.length - equivalent.length;
    summary.push(
      `| \`${chart.file}\` | ${mine.length} | ${killed.length} | ${equivalent.length} | ${holes.length} | ${killed.length}/${nonEquivalent} (${pct(killed.length, nonEquivalent)}) |`,
    );
    lines.push(`${chart.file}: ${killed.length}/${mine.length} killed, ${equivalent.length} equivalent, ${holes.length} surviving`);
    for (const { m } of holes) lines.push(`  SURVIVOR ${m.id}\n           ${m.meaning}`);
    for (const { m } of equivalent) lines.push(`  equivalent ${m.id}\n           ${equivalence(chart.name, m)}`);
    if (write) equivalentsFor.push(...equivalent.map(({ m }) => `| \`${m.id}\` | ${equivalence(chart.name, m)} |`));
    if (write) survivorsFor.push(...holes.map(({ m }) => `| \`${m.id}\` | ${m.meaning} |`));
  }
  console.log(lines.join('\n'));
  const slowest = [...outcomes].sort((a, b) => b.ms - a.ms)[0];
  const played = outcomes.reduce((n, o) => n + (o.played ?? 0), 0);
  console.log(`${outcomes.length} mutants in ${seconds} s on ${jobs} workers, ${played} paths played (slowest ${slowest?.id}: ${slowest?.ms} ms)`);
  if (args.includes('--verbose')) for (const o of outcomes.filter((x) => x.killed)) console.log(`killed ${o.id}\n  by ${o.by?.slice(0, 400)}`);
  if (write) writeDoc(summary, seconds, jobs, played);
  recordKillSet(all, outcomes, sample === 1 && !only, write ? KILL_SET_FILE : option('kill-set'));
  const holes = outcomes.filter((o) => !o.killed && equivalence(o.chart, byId.get(`${o.chart}\u0000${o.id}`)!.mutant) === null);
  process.exit(holes.length ? 1 : 0);
}

/** The union of the first killing paths, written when every mutant was played (or to `--kill-set FILE`). */
function recordKillSet(all: Array<{ chart: string; mutant: Mutant }>, outcomes: Outcome[], complete: boolean, file: string | undefined) {
  const byJob = new Map(outcomes.map((o) => [`${o.chart}\u0000${o.id}`, o]));
  const set = killSetOf(
    all.map(({ chart, mutant }) => {
      const outcome = byJob.get(`${chart}\u0000${mutant.id}`)!;
      return { chart: chart as Chart['name'], meaning: mutant.meaning, killed: outcome.killed, ...(outcome.path ? { path: outcome.path } : {}) };
    }),
    complete,
  );
  for (const [chart, { paths, killedElsewhere }] of Object.entries(set.charts)) {
    console.log(`kill-set of ${chart}: ${paths.length} paths (${killedElsewhere} mutants killed on their own paths or by not building)`);
  }
  if (file) writeKillSet(set, file);
}

const equivalentsFor: string[] = [];
const survivorsFor: string[] = [];
const pct = (a: number, b: number) => `${b ? ((100 * a) / b).toFixed(1) : '100.0'} %`;

async function runAll(queue: Job[], jobs: number): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const pending = [...queue];
  const self = fileURLToPath(import.meta.url);
  const spawnWorker = (): Promise<void> =>
    new Promise((resolve) => {
      const child: ChildProcess = fork(self, ['--worker'], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
      let current: Job | undefined;
      let timer: NodeJS.Timeout | undefined;
      let since = 0;
      let path = '';
      const watch = (ms = STALL_MS) => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          // A mutant that never finishes a path the real chart finishes at once is killed: the agent would hang.
          outcomes.push({ ...current!, killed: true, by: `${path}: no step for ${ms} ms (an endless loop)`, ms: Date.now() - since });
          child.removeAllListeners('exit');
          child.kill('SIGKILL');
          void spawnWorker().then(resolve);
        }, ms);
      };
      const next = () => {
        current = pending.shift();
        if (!current) {
          child.kill();
          return resolve();
        }
        since = Date.now();
        watch();
        child.send(current);
      };
      child.on('message', (message: Outcome | { ready: true } | { playing: string } | { busy: string }) => {
        if ('ready' in message) return next();
        if ('playing' in message) {
          path = message.playing;
          return watch();
        }
        if ('busy' in message) {
          path = message.busy;
          return watch(BUSY_MS);
        }
        clearTimeout(timer);
        outcomes.push(message);
        if (outcomes.length % 50 === 0) process.stderr.write(`${outcomes.length}/${queue.length}\n`);
        if (message.ms > 10_000) process.stderr.write(`slow: ${message.id} ${message.ms} ms, ${message.played} paths, ${message.killed ? 'killed' : 'survived'}\n`);
        next();
      });
      child.on('exit', (code) => {
        if (current && !outcomes.some((o) => o.chart === current!.chart && o.id === current!.id)) {
          clearTimeout(timer);
          outcomes.push({ ...current, killed: true, by: `the worker exited with ${code}`, ms: 0 });
          void spawnWorker().then(resolve);
        }
      });
    });
  await Promise.all(Array.from({ length: jobs }, spawnWorker));
  return outcomes;
}

const MARK = '<!-- mutation check: generated by scripts/mutate.ts -->';

function writeDoc(summary: string[], seconds: number, jobs: number, played: number) {
  const path = 'docs/reliability.md';
  const current = readFileSync(path, 'utf8');
  const head = current.includes(MARK) ? current.slice(0, current.indexOf(MARK)).trimEnd() : current.trimEnd();
  const section = [
    MARK,
    '',
    '# Reliability: mutation check of the charts',
    '',
    `Generated ${new Date().toISOString()} by \`npm run mutate\`: ${jobs} workers on ${cpus().length} cores shared with other work (load`,
    `average ${loadavg()[0]!.toFixed(1)} at the end), ${seconds} s, ${played} paths played.`,
    '',
    'Each mutant changes exactly one transition of a chart (retarget to a sibling of its target or of its source,',
    'guard negated or dropped, one action dropped) and is played on that chart\'s paths: the oracle\'s own paths, the',
    'real chart\'s model paths and the mutant\'s own model paths, each step compared with an oracle written from the',
    'protocol (`test/model/oracle.ts`, `test/monitor/oracle.ts`, `test/report/oracle.ts`), never with the chart itself.',
    'A mutant is killed when some step shows the outside world something the oracle does not expect: a report (with',
    'its pps_type), a KVP record, an actor started or still running, an output or exit code; the real chart must',
    'pass every path. The provisioning oracle covers ordinary VMs, pool VMs (pool Ready, waiting marker, polls of',
    '`reprovisiondata`, claim, reboot and SIGTERM while waiting, unsupported pool types) and steps left out with',
    '`--only`/`--skip`. A mutant is built in memory and played in a worker process; it stops at its first killing',
    'path (paths that killed its transition\'s other mutants first), and its own model paths are generated only when',
    'no fixed path kills it. A mutant caught in an endless loop of eventless transitions is killed by that loop.',
    'The path that killed each mutant first is recorded in `test/mutation/kill-set.json`: `npm test` plays that',
    'kill-set and a set of model paths taking every transition; every other path is played only here.',
    '',
    '| chart | mutants | killed | equivalent | surviving | killed / non-equivalent |',
    '|---|---|---|---|---|---|',
    ...summary,
    '',
    '## Surviving mutants',
    '',
    ...(survivorsFor.length ? ['| mutant | what it means |', '|---|---|', ...survivorsFor] : ['None.']),
    '',
    '## Equivalent mutants',
    '',
    ...(equivalentsFor.length ? ['| mutant | why nothing outside can tell |', '|---|---|', ...equivalentsFor] : ['None.']),
    '',
  ];
  writeFileSync(path, `${head}\n\n${section.join('\n')}`);
}

if (args[0] === '--worker') {
  // A worker builds and judges the mutants the parent sends, one at a time; each chart's paths are computed once.
  const byChart = new Map(CHARTS.map((c) => [c.name, { chart: c, mutants: new Map(mutantsOf(c.machine).map((m) => [m.id, m])), judge: null as Promise<Judge> | null }]));
  const judgeJob = async (job: Job): Promise<Outcome> => {
    const started = Date.now();
    try {
      const entry = byChart.get(job.chart as never);
      const mutant = entry?.mutants.get(job.id);
      if (!entry || !mutant) throw new Error(`mutant not found in the worker: ${job.chart} ${job.id}`);
      const watch = { playing: (name: string) => process.send!({ playing: name }), busy: (what: string) => process.send!({ busy: what }) };
      const judge = await (entry.judge ??= Judge.of(entry.chart, 'all', watch, recordedKillers(entry.chart.name)));
      const verdict = await judge.judge(mutant);
      return { ...job, ...verdict, ms: Date.now() - started };
    } catch (error) {
      return { ...job, killed: false, broken: (error as Error).message, ms: Date.now() - started };
    }
  };
  // judgeJob never rejects: every failure is its job's outcome. A send that fails (the parent is gone) ends the
  // worker as an unhandled rejection, which is what should happen to it then.
  process.on('message', (job: Job) => void judgeJob(job).then((outcome) => process.send!(outcome)));
  process.send!({ ready: true });
} else {
  await main();
}
