/**
 * The local-fault section of docs/reliability.md, from test-output/local-reliability.json (written by
 * test/hardening/local-fault-matrix.test.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Expected } from '../test/hardening/local-fault-cases.js';
import { DEADLINE_MS } from '../test/hardening/local-fault-cases.js';
import type { LocalObserved } from '../test/hardening/local-fault-run.js';

export const LOCAL_START = '<!-- local-faults:start -->';
export const LOCAL_END = '<!-- local-faults:end -->';

interface LocalResults {
  date: string;
  rows: Array<{ path: string; fault: string; expected: Expected; observed: LocalObserved; pass: boolean }>;
}

const cell = (s: string) => s.replace(/\|/g, '\\|');
const outcome = (result: string | null, reason: string | null) => (result === 'provisioned' ? 'provisioned' : `${result ?? '—'}: ${reason ?? '—'}`);
const reports = (kinds: string[]) => (kinds.length ? kinds.map((k) => k.replace('NotReady/', '')).join(' → ') : 'none');

function expected(e: Expected): string {
  const parts = [outcome(e.result, e.reason), `exit ${e.exitCode}`, `reports ${reports(e.reports)}`];
  if (e.kvpReport) parts.push(`KVP report ${e.kvpReport}`);
  if (e.sinkOff) parts.push(`${e.sinkOff} off`);
  return parts.join(', ');
}

function observed(o: LocalObserved): string {
  const parts = [outcome(o.result, o.reason), `exit ${o.exitCode ?? o.signal}`, `reports ${reports(o.reports)}`];
  if (o.kvpReport) parts.push(`KVP report ${o.kvpReport.startsWith('failed') ? 'failed' : o.kvpReport}`);
  if (o.sinksOff.length) parts.push(`off: ${o.sinksOff.join(', ')}`);
  if (o.victimsChanged.length) parts.push(`**victims changed: ${o.victimsChanged.join(', ')}**`);
  if (o.crashLines.length) parts.push(`crash: ${o.crashLines[0]}`);
  return parts.join(', ');
}

/** The section's lines between the markers, or null when the results file does not exist. */
export function localSection(file: string): string[] | null {
  if (!existsSync(file)) return null;
  const results = JSON.parse(readFileSync(file, 'utf8')) as LocalResults;
  const rows = [...results.rows].sort((a, b) => a.path.localeCompare(b.path) || a.fault.localeCompare(b.fault));
  const passed = rows.filter((r) => r.pass).length;
  const times = rows.map((r) => r.observed.ms).sort((a, b) => a - b);
  return [
    LOCAL_START,
    '## Local faults: the machine fights back',
    '',
    `Generated ${results.date}. Each row is one case of \`test/hardening/local-fault-matrix.test.ts\`: the built agent`,
    '(`dist/bootstate.mjs --scratch`, fake fabric on loopback) in its own mount namespace, where one path it reads',
    'or writes is spoiled: *full* is a 64 KiB tmpfs with no free block, *no free inodes* a tmpfs with none, *read-only* a',
    'read-only bind mount, *wrong type* a file where a directory belongs or a directory where a file belongs, *symlink*',
    'and *hard link* point at a victim file outside bootstate\'s paths, *permission denied* is mode 000 with the agent',
    'running without `CAP_DAC_OVERRIDE`. Every row also asserts: every victim file has the same bytes and the same inode',
    `afterwards, no crash on stderr, each sink turned off is told exactly once, and the run ended within ${DEADLINE_MS / 1000} s.`,
    '',
    `**${passed} of ${rows.length} cases pass.** Run times (spawn to exit, on a shared machine): median ${Math.round(times[times.length >> 1] ?? 0)} ms, longest ${Math.round(times.at(-1) ?? 0)} ms.`,
    '',
    '| path | fault | expected | observed | |',
    '|---|---|---|---|---|',
    ...rows.map((r) => `| ${cell(r.path)} | ${r.fault} | ${cell(expected(r.expected))} | ${cell(observed(r.observed))} | ${r.pass ? 'pass' : '**FAIL**'} |`),
    '',
    LOCAL_END,
  ];
}

/** The local section already in `doc` (kept when the matrix was not rerun), or none. */
export function existingLocalSection(doc: string): string[] {
  const start = doc.indexOf(LOCAL_START);
  const end = doc.indexOf(LOCAL_END);
  return start >= 0 && end > start ? doc.slice(start, end + LOCAL_END.length).split('\n') : [];
}
