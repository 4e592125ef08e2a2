/**
 * The run journal: one allow-listed JSONL line per macrostep in `<dir>/runs/<start>-<vm_id>.jsonl`, appended with
 * a synchronous write so that the lines before a crash are on disk, and rotated so the directory stays bounded.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { InspectionEvent } from 'xstate';
import { openRegularSync, UnexpectedFileError } from '../system/open-regular.js';
import { DEFAULT_ALLOW, recordMacrosteps, type AllowList, type MacrostepRecord } from './projection.js';

export { edgeKey, statePath } from './edge-key.js';
export { activePaths } from '../core/state-path.js';
export type { MacrostepRecord, RunOutput, AllowList } from './projection.js';

/** One journal line: a macrostep record stamped with the wall-clock time it completed. */
export interface JournalLine extends MacrostepRecord {
  t: string;
}

export interface JournalOptions {
  /** The data directory; journals go to its `runs/` subdirectory. */
  dir: string;
  vmId: string;
  /** How many journals to keep, this one included (config `journal.keep`). */
  keep?: number;
  now?: () => Date;
  allow?: AllowList;
}

export interface Journal {
  /** The observer; `at` stamps an event that was buffered before the journal existed with when it happened. */
  inspect: (event: InspectionEvent, at?: Date) => void;
  close(): void;
  path: string;
}

export const DEFAULT_KEEP = 20;
const JOURNAL_NAME = /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z-[A-Za-z0-9-]+\.jsonl$/;

/** The journals directory inside a data directory. */
export function runsDir(dir: string): string {
  return path.join(dir, 'runs');
}

/** A filename-safe, lexically sortable ISO timestamp (`2024-05-01T12-30-00.123Z`). */
function fileTime(date: Date): string {
  return date.toISOString().replace(/:/g, '-');
}

/** Journal file names in `runs/`, oldest first (names sort by start time). */
function journalNames(runs: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(runs);
  } catch {
    return [];
  }
  return names.filter((name) => JOURNAL_NAME.test(name)).sort();
}

/** Deletes the oldest journals so that at most `keep` remain. */
export function rotateJournals(dir: string, keep: number): string[] {
  const runs = runsDir(dir);
  const names = journalNames(runs);
  const doomed = names.slice(0, Math.max(0, names.length - Math.max(1, keep)));
  for (const name of doomed) {
    try {
      fs.rmSync(path.join(runs, name), { force: true });
    } catch {
      // Not a journal of ours (a directory under a journal's name): it stays, the new journal is still written.
    }
  }
  return doomed.map((name) => path.join(runs, name));
}

/** Opens a new journal for one run and returns its `inspect` observer; pass it to `createActor(..., { inspect })`. */
export function createJournal(options: JournalOptions): Journal {
  const now = options.now ?? (() => new Date());
  const runs = runsDir(options.dir);
  fs.mkdirSync(runs, { recursive: true, mode: 0o700 });
  // Rotation deletes by name in here: a symlink planted as `runs` would point it at someone else's files.
  const runsStat = fs.lstatSync(runs);
  if (!runsStat.isDirectory()) throw new UnexpectedFileError(runs, runsStat.isSymbolicLink() ? 'symlink' : 'not a directory');
  fs.chmodSync(runs, 0o700);
  const vmId = options.vmId.replace(/[^A-Za-z0-9-]/g, '') || 'unknown';
  const file = path.join(runs, `${fileTime(now())}-${vmId}.jsonl`);
  let fd: number | null = openRegularSync(file, { flags: fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT });
  fs.fchmodSync(fd, 0o600);
  rotateJournals(options.dir, options.keep ?? DEFAULT_KEEP);

  let stamp: Date | undefined;
  const write = (step: MacrostepRecord): void => {
    if (fd === null) return;
    const line: JournalLine = { t: (stamp ?? now()).toISOString(), ...step };
    fs.writeSync(fd, `${JSON.stringify(line)}\n`);
  };
  const record = recordMacrosteps(write, options.allow ?? DEFAULT_ALLOW);
  return {
    inspect(event, at) {
      stamp = at;
      record(event);
    },
    close() {
      if (fd === null) return;
      fs.closeSync(fd);
      fd = null;
    },
    path: file,
  };
}

/** Parses a journal file; a torn last line (a crash mid-write) is dropped rather than failing the whole read. */
export function readJournal(file: string): JournalLine[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== '');
  const out: JournalLine[] = [];
  for (const [index, line] of lines.entries()) {
    try {
      out.push(JSON.parse(line) as JournalLine);
    } catch (error) {
      if (index === lines.length - 1) break;
      throw new Error(`${file}:${index + 1}: not a journal line`, { cause: error });
    }
  }
  return out;
}

/**
 * Reads a journal file line by line, in bounded chunks, as readJournal parses it: a torn last line is dropped, an
 * unparsable line before another one fails the read. Memory is one chunk and one line, whatever the file's size.
 */
export async function* streamJournal(file: string): AsyncGenerator<JournalLine> {
  const stream = fs.createReadStream(file, { encoding: 'utf8', highWaterMark: 1 << 20 });
  let rest = '';
  let index = 0;
  let torn: unknown = null;
  let tornAt = 0;
  function* parse(line: string): Generator<JournalLine> {
    if (line.trim() === '') return;
    if (torn !== null) throw new Error(`${file}:${tornAt + 1}: not a journal line`, { cause: torn });
    try {
      yield JSON.parse(line) as JournalLine;
    } catch (error) {
      // Only the last line may be torn: this one fails the read once another line follows it.
      torn = error;
      tornAt = index;
    }
    index++;
  }
  for await (const chunk of stream as AsyncIterable<string>) {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop()!;
    for (const line of parts) yield* parse(line);
  }
  yield* parse(rest);
}

/** The path of the newest journal in a data directory, or `undefined` when there is none. */
export function latestJournal(dir: string): string | undefined {
  const names = journalNames(runsDir(dir));
  const newest = names[names.length - 1];
  return newest === undefined ? undefined : path.join(runsDir(dir), newest);
}
