#!/usr/bin/env node
// Runs every benchmark in bench/ (or those --only names) and writes their figures, each benchmark's under a line with
// the date and the machine, into docs/performance.md between <!-- bench:start --> and <!-- bench:end --> (appended
// with the markers when they are absent). The sections of benchmarks this run did not run are kept as they were.
// Usage: node bench/run.mjs [--only cold-start,rss] [--no-write]    BENCH_RUNS=N sets the repetitions.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, release } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fmt, measuredLine, mergeSections, readSections, renderBlock, replaceBlock } from './figures.mjs';
import { writeReadmeFigures } from './readme-figures.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Ours print `{bench, rows}`; the KVP and monitor benchmarks print their own JSON, summarised by `rows`. */
const BENCHES = [
  { name: 'cold-start', file: 'bench/cold-start.ts' },
  { name: 'time-to-ready', file: 'bench/time-to-ready.ts' },
  { name: 'time-to-ready-sandbox', file: 'bench/time-to-ready-sandbox.ts' },
  // Only with BENCH_BASELINE=<another checkout with dist/ built>: this build against that one, in the same run.
  { name: 'ab', file: 'bench/ab.ts', skip: !process.env.BENCH_BASELINE },
  { name: 'latency', file: 'bench/latency.ts' },
  { name: 'rss', file: 'bench/rss.ts' },
  { name: 'kvp', file: 'bench/kvp.ts', rows: kvpRows },
  { name: 'markers', file: 'bench/markers.ts' },
  { name: 'otlp-export', file: 'bench/otlp-export.ts' },
  { name: 'fleet', file: 'bench/fleet.ts' },
  { name: 'monitor-cycles', file: 'bench/monitor-cycles.ts' },
  { name: 'monitor-booted-day', file: 'bench/monitor-booted-day.ts' },
  { name: 'monitor-soak', file: 'bench/monitor-soak.ts', nodeArgs: ['--expose-gc'], rows: monitorSoakRows },
  { name: 'boot-time', file: 'bench/boot-time.ts' },
  { name: 'peer-boot-time', file: 'bench/peer-boot-time.ts' },
];

const { values } = parseArgs({ options: { only: { type: 'string' }, 'no-write': { type: 'boolean' } } });
const only = values.only?.split(',');
const unknown = only?.filter((name) => !BENCHES.some((b) => b.name === name));
if (unknown?.length) throw new Error(`--only names no benchmark: ${unknown.join(', ')} (known: ${BENCHES.map((b) => b.name).join(', ')})`);

const sections = [];
for (const bench of BENCHES) {
  if (bench.skip || (only && !only.includes(bench.name))) continue;
  if (!existsSync(join(root, bench.file))) {
    process.stderr.write(`${bench.name}: ${bench.file} absent, skipped\n`);
    continue;
  }
  process.stderr.write(`${bench.name}: running ${bench.file}\n`);
  const result = spawnSync(process.execPath, [...(bench.nodeArgs ?? []), '--import', 'tsx', bench.file], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    // Without the build host's extra CA file, which Node would read at every start of every timed process
    // (bench/harness.ts says why).
    env: Object.fromEntries(Object.entries(process.env).filter(([key]) => key !== 'NODE_EXTRA_CA_CERTS')),
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.status !== 0) {
    sections.push({ name: bench.name, rows: [], failed: `exited with ${result.status ?? result.signal}` });
    continue;
  }
  const parsed = parseOutput(result.stdout);
  sections.push({ name: bench.name, rows: bench.rows ? bench.rows(parsed) : parsed.rows ?? [], runs: parsed.runs });
}

const fresh = render(sections);
process.stdout.write(`${renderBlock(fresh)}\n`);
if (!values['no-write']) {
  write(fresh);
  writeReadmeFigures(root, sections, `${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, Linux ${release()}`);
}

/** The last JSON document on stdout: one line, or the whole output when it is pretty-printed. */
function parseOutput(stdout) {
  const lines = stdout.trim().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      return JSON.parse(lines.slice(i).join('\n'));
    } catch {}
  }
  return { rows: [{ metric: 'output', median: Number.NaN, unit: '', note: stdout.trim().slice(-200) }] };
}

function monitorSoakRows(result) {
  const rows = [
    // The resident monitor's chart and clients in one process under tsx, with the fake fabric beside them: a leak
    // check of the chart, not the shipped monitor, whose figures are monitor-cycles'.
    { metric: `in-process chart soak under tsx (not what ships): RSS after ${result.cycles} monitor cycles (${result.represents})`, median: result.samples?.end?.rssMiB, unit: 'MiB' },
    { metric: 'in-process chart soak: RSS growth, second half', median: result.growth?.rssMiBSecondHalf, unit: 'MiB' },
  ];
  if (result.gcForced) rows.push({ metric: 'in-process chart soak: heap growth after forced GC, second half', median: result.growth?.heapUsedMiBSecondHalf, unit: 'MiB' });
  return rows;
}

/** A benchmark that prints `{rows}` is taken as is; otherwise its top-level numbers become rows. */
/** bench/kvp.ts: our batched writer against a Python writer that locks per event as cloud-init does. */
function kvpRows(result) {
  const python = 'Python, flock per event (cloud-init style)';
  return [
    {
      metric: `${result.events} telemetry events, one flock per ${result.bootstate_batched.batch} (bootstate)`,
      median: result.bootstate_batched.median_ms,
      unit: 'ms',
      floor: result.python_lock_per_event.median_loop_ms,
      floorName: python,
    },
    {
      metric: 'one locked write (both call flock(2); bootstate through its addon)',
      target: '≤ 1 ms',
      median: result.bootstate_lock_per_event.per_event_ms,
      unit: 'ms',
      floor: result.python_per_event_ms,
      floorName: python,
    },
  ];
}

/** Each benchmark's section: the line naming this run, and its rows. */
function render(results) {
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown CPU';
  const when = `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${availableParallelism()} × ${cpu}, Linux ${release()}`;
  return results.map((section) => {
    const rows = section.failed ? [`| ${section.name} | **failed**: ${section.failed} | | | | |`] : [];
    for (const row of section.rows) {
      const floor = row.floor === undefined ? '' : `${row.floorName}: ${fmt(row.floor)} ${row.unit}`;
      const ratio = row.floor === undefined ? '' : `×${fmt(row.ratio ?? row.median / row.floor)}`;
      const metric = row.note ? `${row.metric} (${row.note})` : row.metric;
      rows.push(`| ${section.name} | ${metric} | ${fmt(row.median)} ${row.unit} | ${floor} | ${ratio} | ${row.target ?? ''} |`);
    }
    return { name: section.name, measured: measuredLine(when, process.version, section.runs), rows };
  });
}

/** Replaces the sections of the benchmarks that ran in docs/performance.md's block, keeping the others' as they were. */
function write(fresh) {
  const target = join(root, 'docs/performance.md');
  const text = existsSync(target) ? readFileSync(target, 'utf8') : '# Performance\n';
  const order = BENCHES.map((b) => b.name);
  writeFileSync(target, replaceBlock(text, renderBlock(mergeSections(readSections(text), fresh, order))));
  process.stderr.write(`wrote ${fresh.map((s) => s.name).join(', ')} into ${target.slice(root.length + 1)}\n`);
}
