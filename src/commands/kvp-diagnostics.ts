/**
 * `bootstate kvp diag`: the boot diagnostics of a pool (src/kvp/diagnostics.ts) put back together and printed for a
 * person — each run's timeline as a table of milliseconds since the kernel started, then its failing step and its
 * kernel log as text — or as JSON. A part missing or corrupt is said, text by text; nothing here throws on a pool.
 */
import type { KvpRecord } from '../kvp/codec.js';
import { unpackDiagnostics, type UnpackedText, type UnpackedTimeline } from '../kvp/diagnostics.js';
import { terminalSafe } from '../core/terminal-text.js';

export interface DiagnosticsOutput {
  io: { stdout: (text: string) => void; stderr: (text: string) => void };
  json: boolean;
  print: (value: unknown) => void;
}

/** A name or a line from the pool: every control character escaped, newlines and tabs too. */
const oneLine = (text: string): string => terminalSafe(text);

const TIMELINE_WORDS: Record<string, string> = {
  firmware_ms: 'firmware (before the kernel)', loader_ms: 'loader (before the kernel)', initrd_ms: 'initrd started',
  userspace_ms: 'user space started', unit_start_ms: 'bootstate started', ready1_ms: 'READY=1 sent',
  ready_accepted_ms: 'Ready accepted', failure_accepted_ms: 'failure report accepted', written_ms: 'diagnostics written',
};

function timelineLines(timeline: UnpackedTimeline): string[] {
  const width = Math.max(...timeline.fields.map(([name]) => (TIMELINE_WORDS[name] ?? oneLine(name)).length), 0);
  return timeline.fields.map(([name, value]) => `  ${(TIMELINE_WORDS[name] ?? oneLine(name)).padEnd(width)}  ${oneLine(value)}${name.endsWith('_ms') ? ' ms' : ''}`);
}

function textLines(text: UnpackedText): string[] {
  if (text.problem !== undefined) return [`  ${oneLine(text.name)}: cannot be read: ${oneLine(text.problem)}`];
  const body = terminalSafe(text.bytes!.toString('utf8'), true).replace(/\n$/, '');
  return [`  ${oneLine(text.name)} (${text.parts} record${text.parts === 1 ? '' : 's'}, ${text.bytes!.length} bytes):`, ...body.split('\n').map((l) => `    ${l}`)];
}

/** Prints every run's diagnostics found in `records`; exit 1 when there are none, or when one could not be read. */
export function printDiagnostics(records: readonly KvpRecord[], { io, json, print }: DiagnosticsOutput): number {
  const { timelines, texts, stray } = unpackDiagnostics(records);
  const problems = texts.filter((t) => t.problem !== undefined).length + stray.length;
  if (json) {
    print({
      timelines: timelines.map((t) => ({ vmId: t.vmId, run: t.run, fields: Object.fromEntries(t.fields) })),
      texts: texts.map(({ bytes, ...t }) => ({ ...t, ...(bytes ? { text: bytes.toString('utf8') } : {}) })),
      stray,
    });
  } else {
    const runs = new Map<string, string[]>();
    const lines = (vmId: string, run: string) => {
      const id = `VM ${vmId}, run ${run}`;
      if (!runs.has(id)) runs.set(id, []);
      return runs.get(id)!;
    };
    for (const t of timelines) lines(t.vmId, t.run).push('  timeline (ms since the kernel started):', ...timelineLines(t).map((l) => `  ${l}`));
    for (const t of texts) lines(t.vmId, t.run).push(...textLines(t));
    for (const [id, body] of runs) io.stdout(`${oneLine(id)}\n${body.join('\n')}\n`);
    for (const key of stray) io.stderr(`bootstate kvp: a diagnostics record with a malformed key: ${oneLine(key)}\n`);
  }
  if (timelines.length === 0 && texts.length === 0) {
    io.stderr('bootstate kvp: no boot diagnostics in the pool\n');
    return 1;
  }
  return problems > 0 ? 1 : 0;
}
