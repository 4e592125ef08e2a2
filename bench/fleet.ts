/**
 * The fleet view over 1,000 recorded runs: how long `bootstate fleet` takes to read them and print the text view,
 * and to write the HTML page too, against `bootstate --help` (the same CLI's start, nothing read; `--version` is
 * answered before the CLI loads) in the same run. The runs are real: the built agent against the fake fabric on
 * loopback with the mixed faults of test/support/fleet-corpus.ts, FLEET_REAL_RUNS of them (default 100, ten per
 * scenario; one takes 0.3–2.5 s and two run at once), replicated into FLEET_RUNS journals (default 1,000) each with its own VM id and start. With
 * FLEET_REAL_RUNS=1000 every journal is a run of its own. The CPU time (GNU time's user + system) is measured
 * too: on a shared, loaded machine the wall time says more about the load than about the view.
 *
 *   npm run build && node bench/run.mjs --only fleet        (BENCH_RUNS=N sets the repetitions, default 7 here)
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { recordFleet, replicate, SCENARIOS } from '../test/support/fleet-corpus.js';
import { builds, interleave, median, report, timeExit, versus } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const TOTAL = Number(process.env.FLEET_RUNS ?? 1000);
const REAL = Number(process.env.FLEET_REAL_RUNS ?? 100);
const [build] = builds();
const TIME = '/usr/bin/time';

/** The CPU time (user + system, ms) `argv` took to exit 0, from GNU time; the machine's load does not inflate it. */
function cpuOf(argv: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(TIME, ['-f', 'cpu %U %S', ...argv], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => {
      const match = /cpu (\d+\.\d+) (\d+\.\d+)\s*$/.exec(stderr);
      if (code !== 0 || !match) reject(new Error(`${argv.join(' ')}: exit ${code}: ${stderr.slice(-200)}`));
      else resolve((Number(match[1]) + Number(match[2])) * 1000);
    });
  });
}

const base = mkdtempSync(join(tmpdir(), 'bootstate-bench-fleet-'));

try {
  const recordStart = performance.now();
  const recorded = await recordFleet(join(base, 'recorded'), Math.max(1, Math.round(REAL / SCENARIOS.length)));
  const recordMs = performance.now() - recordStart;
  const fleetDir = join(base, 'fleet');
  replicate(recorded, fleetDir, TOTAL);
  const bytes = readdirSync(fleetDir).reduce((sum, name) => sum + statSync(join(fleetDir, name)).size, 0);
  const page = join(base, 'fleet.html');
  const samples = await interleave(
    {
      version: () => timeExit([...build!.argv, '--help']),
      text: () => timeExit([...build!.argv, 'fleet', fleetDir]),
      html: () => timeExit([...build!.argv, 'fleet', fleetDir, '-o', page]),
    },
    RUNS,
  );
  const cpu = existsSync(TIME)
    ? await interleave({ version: () => cpuOf([...build!.argv, '--help']), text: () => cpuOf([...build!.argv, 'fleet', fleetDir]) }, RUNS)
    : undefined;
  const what = `${TOTAL} journals (${recorded.length} real runs, ${(bytes / 1048576).toFixed(1)} MiB)`;
  report(
    'fleet',
    [
      versus(`\`bootstate fleet\` over ${what}: text`, samples.text!, '`bootstate --help`', samples.version!, { target: 'a few s' }),
      versus(`\`bootstate fleet -o page.html\` over ${what}: text and HTML`, samples.html!, '`bootstate --help`', samples.version!, { target: 'a few s' }),
      ...(cpu
        ? [
            versus(`\`bootstate fleet\` over ${what}: text, CPU time (user + system)`, cpu.text!, '`bootstate --help`', cpu.version!, {
              note: 'the wall time above counts the machine\'s load; this does not',
            }),
          ]
        : []),
      { metric: `one recorded run: the agent's wall time, spawn to exit (median of ${recorded.length}, 2 at once)`, median: median(recorded.map((r) => r.ms)), unit: 'ms' },
      { metric: `recording the ${recorded.length} real runs, 2 agents at once`, median: recordMs / 1000, unit: 's' },
    ],
    RUNS,
  );
} finally {
  rmSync(base, { recursive: true, force: true });
}
