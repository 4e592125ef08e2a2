/**
 * Boot diagnostics in the guest pool: the boot timeline as one plain record, and larger texts (the kernel log's tail,
 * the failing step's own diagnostics) gzip-compressed, base64-encoded and split over records that each fit the
 * host-safe limits (docs/kvp.md#boot-diagnostics). Keys:
 *
 *   bootstate-boot|<vm_id>|<run>                    the timeline: `name=value|name=value…`
 *   bootstate-diag|<vm_id>|<run>|<name>|<i>/<n>      part i of n of one compressed text
 *
 * `run` is a short random id, so the parts of one run are told from another's. Unpacking never throws: a part missing,
 * duplicated with other bytes, not base64 or a body that does not decompress is reported as a problem of that text.
 */
import type * as Zlib from 'node:zlib';
import { type KvpRecord, SAFE_KEY_BYTES, SAFE_VALUE_BYTES } from './codec.js';

/** node:zlib on first use: a run's script holds this module, and only its end, after Ready, compresses. */
const zlib = (): typeof Zlib => process.getBuiltinModule('node:zlib');

export const TIMELINE_PREFIX = 'bootstate-boot|';
export const DIAG_PREFIX = 'bootstate-diag|';
/** Base64 characters per part: the safe value size rounded down to whole 4-character groups. */
export const PART_CHARS = SAFE_VALUE_BYTES - (SAFE_VALUE_BYTES % 4);
/**
 * Most bytes one text may inflate to when read back: far above what the writer packs (a kernel log tail of 256 KiB),
 * far below what a pool of gzip'd zeros could make (about a gigabyte, past a reader's memory and a string's length).
 */
export const MAX_TEXT_BYTES = 16 << 20;
const NAME = /^[a-z][a-z0-9-]{0,23}$/;
const ID = /^[A-Za-z0-9-]{1,64}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Which run of which VM a record belongs to. */
export interface DiagnosticsRun {
  vmId: string;
  run: string;
}

function checkIds({ vmId, run }: DiagnosticsRun, name?: string): void {
  if (!ID.test(vmId) || !ID.test(run)) throw new RangeError(`diagnostics ids must match ${ID}, got '${vmId}' and '${run}'`);
  if (name !== undefined && !NAME.test(name)) throw new RangeError(`diagnostics name must match ${NAME}, got '${name}'`);
}

/** The timeline record: `fields` joined as `name=value|…`, each value cut of `|`, `=` and control characters. */
export function timelineRecord(ids: DiagnosticsRun, fields: ReadonlyArray<readonly [string, string]>): KvpRecord {
  checkIds(ids);
  const clean = (text: string) => text.replace(/[|=\u0000-\u001f\u007f]/g, '_');
  const value = fields.map(([name, v]) => `${clean(name)}=${clean(v)}`).join('|');
  const key = `${TIMELINE_PREFIX}${ids.vmId}|${ids.run}`;
  if (Buffer.byteLength(value) > SAFE_VALUE_BYTES || key.length > SAFE_KEY_BYTES) throw new RangeError('timeline record too long');
  return { key, value };
}

/** The records of one compressed text; with more than `maxParts` parts, null (the caller cuts the text and retries). */
export function packText(ids: DiagnosticsRun, name: string, body: Buffer, maxParts = Infinity): KvpRecord[] | null {
  checkIds(ids, name);
  const encoded = zlib().gzipSync(body, { level: 9 }).toString('base64');
  const total = Math.max(1, Math.ceil(encoded.length / PART_CHARS));
  if (total > maxParts) return null;
  const head = `${DIAG_PREFIX}${ids.vmId}|${ids.run}|${name}|`;
  return Array.from({ length: total }, (_, i) => ({
    key: `${head}${i + 1}/${total}`,
    value: encoded.slice(i * PART_CHARS, (i + 1) * PART_CHARS),
  }));
}

/** One text as read back: its bytes, or why they cannot be had. */
export interface UnpackedText extends DiagnosticsRun {
  name: string;
  parts: number;
  bytes?: Buffer;
  problem?: string;
}

/** One timeline as read back, its fields in order. */
export interface UnpackedTimeline extends DiagnosticsRun {
  fields: Array<[string, string]>;
}

const PART_KEY = /^bootstate-diag\|([^|]+)\|([^|]+)\|([^|]+)\|(\d{1,5})\/(\d{1,5})$/;

interface Group extends DiagnosticsRun {
  name: string;
  totals: Set<number>;
  parts: Map<number, string[]>;
  malformed: number;
}

/** Gathers the diagnostics records of a pool (others are ignored), grouped by VM, run and name, in pool order. */
function group(records: readonly KvpRecord[]): { groups: Group[]; timelines: UnpackedTimeline[]; stray: string[] } {
  const groups = new Map<string, Group>();
  const timelines: UnpackedTimeline[] = [];
  const stray: string[] = [];
  for (const { key, value } of records) {
    if (key.startsWith(TIMELINE_PREFIX)) {
      const [vmId = '', run = ''] = key.slice(TIMELINE_PREFIX.length).split('|');
      const fields = value.split('|').filter((f) => f !== '').map((f): [string, string] => {
        const eq = f.indexOf('=');
        return eq < 0 ? [f, ''] : [f.slice(0, eq), f.slice(eq + 1)];
      });
      timelines.push({ vmId, run, fields });
      continue;
    }
    if (!key.startsWith(DIAG_PREFIX)) continue;
    const match = PART_KEY.exec(key);
    if (!match) {
      stray.push(key);
      continue;
    }
    const [, vmId, run, name, index, total] = match;
    const id = `${vmId}|${run}|${name}`;
    let entry = groups.get(id);
    if (!entry) groups.set(id, (entry = { vmId: vmId!, run: run!, name: name!, totals: new Set(), parts: new Map(), malformed: 0 }));
    const i = Number(index);
    const n = Number(total);
    if (i < 1 || i > n) entry.malformed++;
    entry.totals.add(n);
    entry.parts.set(i, [...(entry.parts.get(i) ?? []), value]);
  }
  return { groups: [...groups.values()], timelines, stray };
}

/** Why a group's parts cannot be joined, or the joined base64. */
function join(g: Group): { encoded: string } | { problem: string } {
  if (g.totals.size !== 1) return { problem: `parts disagree on their count (${[...g.totals].sort((a, b) => a - b).join(', ')})` };
  if (g.malformed > 0) return { problem: `${g.malformed} part number(s) out of range` };
  const total = [...g.totals][0]!;
  const missing = Array.from({ length: total }, (_, i) => i + 1).filter((i) => !g.parts.has(i));
  if (missing.length > 0) {
    const shown = missing.length > 10 ? `${missing.slice(0, 10).join(', ')}, …` : missing.join(', ');
    return { problem: `${missing.length} of ${total} parts missing (${shown})` };
  }
  const chunks: string[] = [];
  for (let i = 1; i <= total; i++) {
    const values = new Set(g.parts.get(i));
    if (values.size > 1) return { problem: `part ${i} appears ${g.parts.get(i)!.length} times with different contents` };
    chunks.push([...values][0]!);
  }
  return { encoded: chunks.join('') };
}

/** Decodes one group: base64, then gunzip; a problem in words instead of an exception. */
function decodeGroup(g: Group): UnpackedText {
  const out: UnpackedText = { vmId: g.vmId, run: g.run, name: g.name, parts: g.parts.size };
  const joined = join(g);
  if ('problem' in joined) return { ...out, problem: joined.problem };
  if (joined.encoded.length % 4 !== 0 || !BASE64.test(joined.encoded)) return { ...out, problem: 'the parts are not base64' };
  try {
    return { ...out, bytes: zlib().gunzipSync(Buffer.from(joined.encoded, 'base64'), { maxOutputLength: MAX_TEXT_BYTES }) };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') return { ...out, problem: `the text inflates to larger than ${MAX_TEXT_BYTES} bytes` };
    return { ...out, problem: `the parts do not decompress: ${(error as Error).message}` };
  }
}

/** Every timeline and compressed text in `records`, reassembled; problems are reported, never thrown. */
export function unpackDiagnostics(records: readonly KvpRecord[]): { timelines: UnpackedTimeline[]; texts: UnpackedText[]; stray: string[] } {
  const { groups, timelines, stray } = group(records);
  return { timelines, texts: groups.map(decodeGroup), stray };
}
