/**
 * A large run journal for the trace's memory test, written in bounded chunks: a real journal
 * (`imds-retry-journal.jsonl`, a run whose IMDS answered 503 until its deadline) with its retry cycle, a request
 * and its backoff, repeated `cycles` times, renumbered and retimed (100 ms a cycle), then the real ending.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

const TEMPLATE = new URL('./imds-retry-journal.jsonl', import.meta.url);
/** Lines 0–6: loading to the first backoff; 7–8: one retry (requesting, backoff); 25–26: the deadline and the failure report. */
const HEAD = 7;
const CYCLE = [7, 8];
const TAIL = [25, 26];

/** Writes the journal to `file`; returns how many lines it has. */
export function writeLargeJournal(file: string, cycles: number): number {
  const template = readFileSync(TEMPLATE, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  const start = Date.parse(template[0]!.t as string);
  const offset = (line: Record<string, unknown>) => Date.parse(line.t as string) - start;
  const fd = openSync(file, 'w');
  let seq = 0;
  let chunk = '';
  const emit = (line: Record<string, unknown>, ms: number) => {
    chunk += `${JSON.stringify({ ...line, t: new Date(start + ms).toISOString(), seq: seq++ })}\n`;
    if (chunk.length > 1 << 20) {
      writeSync(fd, chunk);
      chunk = '';
    }
  };
  try {
    for (const line of template.slice(0, HEAD)) emit(line, offset(line));
    const cycleStart = offset(template[CYCLE[0]!]!);
    for (let i = 0; i < cycles; i++) for (const index of CYCLE) emit(template[index]!, offset(template[index]!) + i * 100);
    const shift = cycles * 100 - (offset(template[TAIL[0]!]!) - cycleStart) + 50;
    for (const index of TAIL) emit(template[index]!, offset(template[index]!) + shift);
    writeSync(fd, chunk);
  } finally {
    closeSync(fd);
  }
  return seq;
}
