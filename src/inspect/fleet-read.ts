/**
 * Reading many runs for the fleet view: paths, directories and quoted globs expanded to journal files, each journal
 * read in bounded pieces and reduced to one `FleetRun` (fleet-stats.ts); a file whose first line is an OTLP/JSON
 * export request is read as a trace export instead (fleet-otlp.ts), a run per trace. Input from many machines is anybody's
 * bytes: a journal that cannot be read (not JSON lines, a corrupt line before the last, no time on its lines, a
 * line past the size bound) is counted and named with why, never thrown; a torn last line is dropped and the
 * journal named as truncated; a journal of another chart (the monitor's) is counted as skipped.
 */
import fs from 'node:fs';
import path from 'node:path';
import { activePaths } from '../core/state-path.js';
import { inReadyState, provisioningChart, type FleetChart } from './fleet-chart.js';
import { isOtlpExport, runsFromOtlp } from './fleet-otlp.js';
import { normalizeLine } from './journal-input.js';
import type { JournalLine } from './journal.js';
import { edgeTargets, RunAnalysis } from './run-path.js';
import { aggregateFleet, type FleetRun, type FleetSummary, type Unreadable } from './fleet-stats.js';
import { stateName } from './words.js';

export { fleetChart, provisioningChart, type FleetChart } from './fleet-chart.js';

/** The event of the Ready report's actor finishing: the fabric accepted Ready. */
export const READY_ACCEPTED_EVENT = 'xstate.done.actor.readyReport';
/** A longer line is not one the agent writes: the journal is named unreadable instead of held in memory. */
export const MAX_LINE_BYTES = 4 << 20;
const JOURNAL_FILE = /^(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z)-([A-Za-z0-9-]+)\.jsonl$/;

/** A journal no larger than this is read in one piece; a larger one is streamed in bounded chunks. */
const WHOLE_READ_BYTES = 1 << 20;

/** A journal's pieces of text: the whole file when it is small (one read, no stream's ticks), else bounded chunks. */
async function* chunksOf(file: string): AsyncGenerator<string> {
  // O_NONBLOCK: a FIFO under a journal's name is refused below, never waited on; a regular file reads the same.
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  let streamed = false;
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw new Error('not a regular file');
    const size = stat.size;
    if (size <= WHOLE_READ_BYTES) {
      const buffer = Buffer.alloc(size);
      const read = fs.readSync(fd, buffer, 0, size, 0);
      yield buffer.toString('utf8', 0, read);
      return;
    }
    streamed = true;
    const stream = fs.createReadStream(file, { fd, encoding: 'utf8', highWaterMark: 1 << 16 });
    try {
      for await (const chunk of stream as AsyncIterable<string>) yield chunk;
    } finally {
      stream.destroy();
    }
  } finally {
    if (!streamed) fs.closeSync(fd);
  }
}

/** A journal's lines, parsed one at a time; a bad line is an error unless it is the last, which is then torn. */
async function* journalLines(file: string, torn: { last: boolean }): AsyncGenerator<unknown> {
  let rest = '';
  let number = 0;
  let pending: { number: number } | null = null;
  function* parse(line: string): Generator<unknown> {
    number++;
    if (line.trim() === '') return;
    if (pending) throw new Error(`line ${pending.number} is not JSON`);
    try {
      yield JSON.parse(line);
    } catch {
      pending = { number };
    }
  }
  for await (const chunk of chunksOf(file)) {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop()!;
    if (rest.length > MAX_LINE_BYTES) throw new Error(`line ${number + parts.length + 1} is longer than ${MAX_LINE_BYTES} bytes`);
    for (const line of parts) yield* parse(line);
  }
  yield* parse(rest);
  torn.last = pending !== null;
}

/** The VM id and start a journal's name carries (`<start>-<vm id>.jsonl`), when it has the agent's form. */
function nameParts(file: string): { vmId?: string; start?: string } {
  const match = JOURNAL_FILE.exec(path.basename(file));
  return match ? { vmId: match[2], start: match[1] } : {};
}

/** A parsed line's time, or a reason it is not a journal line. */
function lineTime(raw: unknown, index: number): number {
  const t = raw && typeof raw === 'object' && !Array.isArray(raw) ? (raw as { t?: unknown }).t : undefined;
  const ms = typeof t === 'string' ? Date.parse(t) : Number.NaN;
  if (!Number.isFinite(ms)) throw new Error(`line ${index + 1} is not a journal line (no time)`);
  return ms;
}

/**
 * Whether a line enters (or passes through) a state that tells systemd READY=1: a transition's target in one, or,
 * on a journal's first line (a journal may begin mid-run), an active state in one.
 */
function entersReady(chart: FleetChart, line: JournalLine, first: boolean): boolean {
  if (line.transitions.some((key) => edgeTargets(key).some((state) => inReadyState(chart, state)))) return true;
  return first && activePaths(line.value, chart.graph.root).some((state) => chart.readyStates.has(state));
}

type ReadResult = { run: FleetRun } | { unreadable: Unreadable } | { skipped: Unreadable };

const why = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Reads one journal into one run, or says why it is not one. */
export function readFleetRun(file: string, chart: FleetChart): Promise<ReadResult> {
  const torn = { last: false };
  return journalRun(file, chart, journalLines(file, torn), torn);
}

/** The first item of an iteration already taken, then the rest. */
async function* prepend(first: IteratorResult<unknown>, rest: AsyncIterator<unknown>): AsyncGenerator<unknown> {
  if (first.done) return;
  yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

/** Reads one file: a journal (one run) or an OTLP/JSON trace export (a run per trace), told apart by its first line. */
export async function readFleetSource(file: string, chart: FleetChart): Promise<ReadResult[]> {
  const torn = { last: false };
  const lines = journalLines(file, torn);
  let first: IteratorResult<unknown>;
  try {
    first = await lines.next();
  } catch (error) {
    return [{ unreadable: { source: file, why: why(error) } }];
  }
  if (first.done || !isOtlpExport(first.value)) return [await journalRun(file, chart, prepend(first, lines), torn)];
  try {
    return await runsFromOtlp(prepend(first, lines), file, chart);
  } catch (error) {
    return [{ unreadable: { source: file, why: why(error) } }];
  }
}

/** One journal's parsed lines reduced to one run, or why they are not one. */
async function journalRun(file: string, chart: FleetChart, lines: AsyncIterable<unknown>, torn: { last: boolean }): Promise<ReadResult> {
  const analysis = new RunAnalysis(chart.graph);
  let start = 0;
  let index = 0;
  let readyMs: number | undefined;
  let acceptedMs: number | undefined;
  let endMs = 0;
  try {
    for await (const raw of lines) {
      const ms = lineTime(raw, index);
      const line = normalizeLine(raw, index);
      if (index === 0) {
        start = ms;
        if (line.machine !== chart.graph.id) return { skipped: { source: file, why: `a journal of the ${line.machine || 'unnamed'} chart` } };
      }
      const since = Math.max(0, ms - start);
      endMs = Math.max(endMs, since);
      if (readyMs === undefined && entersReady(chart, line, index === 0)) readyMs = since;
      if (acceptedMs === undefined && line.event === READY_ACCEPTED_EVENT) acceptedMs = since;
      analysis.add(line);
      index++;
    }
  } catch (error) {
    return { unreadable: { source: file, why: why(error) } };
  }
  if (index === 0) return { unreadable: { source: file, why: torn.last ? 'its only line is torn' : 'empty' } };
  const last = analysis.last!;
  const run = analysis.finish();
  const output = last.output;
  const states: Record<string, number> = {};
  for (const timing of run.timings) if (chart.steps.has(timing.state)) states[stateName(chart.graph.root, timing.state)] = timing.ms;
  const name = nameParts(file);
  const fleetRun: FleetRun = {
    source: file,
    vmId: name.vmId ?? 'unknown',
    startedAt: analysis.first?.t ?? name.start ?? '',
    outcome: run.complete ? (output?.result ?? '(no result)') : 'incomplete',
    ok: run.outcome === 'ok',
    totalMs: endMs,
    states,
  };
  if (!fleetRun.ok) fleetRun.reason = run.complete ? (output?.reason ?? output?.result ?? 'failed') : `ended before a final state (last status ${last.status})`;
  if (!fleetRun.ok && output?.cause) fleetRun.cause = output.cause;
  if (output?.exitCode !== undefined) fleetRun.exitCode = output.exitCode;
  if (readyMs !== undefined) fleetRun.readyMs = readyMs;
  if (acceptedMs !== undefined) fleetRun.acceptedMs = acceptedMs;
  if (torn.last) fleetRun.truncated = true;
  return { run: fleetRun };
}

/** Whether a path segment holds glob characters. */
const isPattern = (segment: string): boolean => /[*?[]/.test(segment);

/** A glob segment as a regular expression: `*` any run of characters but `/`, `?` one, `[…]` a class. */
export function segmentPattern(segment: string): RegExp {
  let source = '';
  for (let i = 0; i < segment.length; i++) {
    const char = segment[i]!;
    const close = char === '[' ? segment.indexOf(']', i + 2) : -1;
    if (char === '*') source += '[^/]*';
    else if (char === '?') source += '[^/]';
    else if (close > 0) {
      const body = segment.slice(i + 1, close).replace(/^!/, '^').replace(/\\/g, '\\\\');
      source += `[${body}]`;
      i = close;
    } else source += char.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

const entriesOf = (dir: string): fs.Dirent[] => {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
  } catch {
    return [];
  }
};

/** The paths a glob matches (`*`, `?`, `[…]` in any segment, `**` for any depth of directories), sorted. */
export function expandGlob(pattern: string): string[] {
  const absolute = pattern.startsWith('/');
  const segments = pattern.split('/').filter((segment) => segment !== '');
  let bases = [absolute ? '/' : '.'];
  for (const [index, segment] of segments.entries()) {
    const lastSegment = index === segments.length - 1;
    const next: string[] = [];
    for (const base of bases) {
      if (segment === '**') next.push(base, ...subdirectories(base));
      else if (!isPattern(segment)) next.push(path.join(base, segment));
      else {
        const match = segmentPattern(segment);
        for (const entry of entriesOf(base)) if (match.test(entry.name) && (lastSegment || entry.isDirectory())) next.push(path.join(base, entry.name));
      }
    }
    bases = [...new Set(next)];
  }
  return bases.filter((file) => fs.existsSync(file)).map((file) => (absolute || pattern.startsWith('./') ? file : path.relative('.', file) || '.'));
}

/** Every directory under `dir`, at any depth (symbolic links not followed). */
function subdirectories(dir: string): string[] {
  return entriesOf(dir).filter((entry) => entry.isDirectory()).flatMap((entry) => [path.join(dir, entry.name), ...subdirectories(path.join(dir, entry.name))]);
}

/** Every `*.jsonl` file under `dir`, at any depth, sorted. */
function journalsUnder(dir: string): string[] {
  return entriesOf(dir).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return journalsUnder(full);
    return entry.isFile() && entry.name.endsWith('.jsonl') ? [full] : [];
  });
}

/** The journal files named by `args` (files, directories, globs), each once, and the arguments that name none. */
export function expandSources(args: readonly string[]): { files: string[]; missing: Unreadable[] } {
  const files = new Set<string>();
  const missing: Unreadable[] = [];
  for (const arg of args) {
    const matches = isPattern(arg) ? expandGlob(arg) : fs.existsSync(arg) ? [arg] : [];
    if (matches.length === 0) missing.push({ source: arg, why: isPattern(arg) ? 'the pattern matches nothing' : 'no such file or directory' });
    for (const match of matches) {
      if (fs.statSync(match).isDirectory()) for (const file of journalsUnder(match)) files.add(file);
      else files.add(match);
    }
  }
  return { files: [...files], missing };
}

/** Reads every journal `args` name and aggregates them: the fleet view's data. */
export async function readFleet(args: readonly string[], chart?: FleetChart): Promise<{ summary: FleetSummary; runs: FleetRun[] }> {
  const fleetChartOf = chart ?? (await provisioningChart());
  const { files, missing } = expandSources(args);
  const runs: FleetRun[] = [];
  const unreadable: Unreadable[] = [...missing];
  const skipped: Unreadable[] = [];
  for (const file of files) {
    for (const result of await readFleetSource(file, fleetChartOf)) {
      if ('run' in result) runs.push(result.run);
      else if ('unreadable' in result) unreadable.push(result.unreadable);
      else skipped.push(result.skipped);
    }
  }
  return { summary: aggregateFleet(runs, unreadable, skipped), runs };
}
