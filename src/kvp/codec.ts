/**
 * The Hyper-V KVP pool record: a fixed 2,560-byte slot holding a 512-byte key field and a 2,048-byte value
 * field, both UTF-8 and NUL padded (docs/protocol.md#kvp-record-layout). Safe mode enforces the limits the host can actually read
 * back (254-byte keys, 1,022-byte values, docs/protocol.md#kvp-limits); unsafe mode only the field widths.
 */
import { BootstateError } from '../core/errors.js';

export const KEY_FIELD_BYTES = 512;
export const VALUE_FIELD_BYTES = 2048;
export const RECORD_BYTES = KEY_FIELD_BYTES + VALUE_FIELD_BYTES;
export const SAFE_KEY_BYTES = 254;
export const SAFE_VALUE_BYTES = 1022;
/** Kernel `HV_KVP_EXCHANGE_MAX_RECORDS`: the daemon ignores anything past this many records. */
export const MAX_RECORDS = 1024;

/** One key/value pair as stored in a pool file. */
export interface KvpRecord {
  key: string;
  value: string;
}

export interface CodecOptions {
  /** Allow keys and values up to the full field widths (511/2047 bytes) instead of the host-safe limits. */
  unsafe?: boolean;
}

export interface DecodeOptions {
  /** Replace invalid UTF-8 with U+FFFD instead of failing (for reading pools written by byte-splitting agents). */
  lossy?: boolean;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const strictDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lossyDecoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Returns the byte limits for keys and values in the given mode (a NUL terminator is always left room for). */
export function limits(options: CodecOptions = {}): { key: number; value: number } {
  return options.unsafe
    ? { key: KEY_FIELD_BYTES - 1, value: VALUE_FIELD_BYTES - 1 }
    : { key: SAFE_KEY_BYTES, value: SAFE_VALUE_BYTES };
}

function reject(message: string, field: 'key' | 'value', extra: Array<[string, string]> = []): never {
  throw new BootstateError('KVP_FAILED', message, { data: [['error', message], ['field', field], ...extra] });
}

/** Checks a string can be stored as a key or value: no NUL, well-formed UTF-16 (so valid UTF-8), within `max` bytes. */
export function checkField(text: string, field: 'key' | 'value', max: number): number {
  if (field === 'key' && text.length === 0) reject('kvp key is empty', field);
  if (text.includes('\0')) reject(`kvp ${field} contains a NUL byte`, field);
  if (LONE_SURROGATE.test(text)) reject(`kvp ${field} is not valid UTF-8 (lone surrogate)`, field);
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > max) {
    reject(`kvp ${field} is ${bytes} bytes, the limit is ${max}`, field, [
      ['bytes', String(bytes)],
      ['max', String(max)],
    ]);
  }
  return bytes;
}

/** Throws a KVP_FAILED BootstateError unless `record` can be encoded in the given mode. */
export function validateRecord(record: KvpRecord, options: CodecOptions = {}): void {
  const max = limits(options);
  checkField(record.key, 'key', max.key);
  checkField(record.value, 'value', max.value);
}

/** Writes one record into `target` at `offset` (the slot is zero-filled first). */
export function encodeRecordInto(record: KvpRecord, target: Buffer, offset: number, options: CodecOptions = {}): void {
  validateRecord(record, options);
  target.fill(0, offset, offset + RECORD_BYTES);
  target.write(record.key, offset, KEY_FIELD_BYTES, 'utf8');
  target.write(record.value, offset + KEY_FIELD_BYTES, VALUE_FIELD_BYTES, 'utf8');
}

/** Encodes one record to its 2,560-byte slot, e.g. `encodeRecord({ key: 'a', value: 'b' }).length === 2560`. */
export function encodeRecord(record: KvpRecord, options: CodecOptions = {}): Buffer {
  const out = Buffer.alloc(RECORD_BYTES);
  encodeRecordInto(record, out, 0, options);
  return out;
}

/** Encodes records back to back, validating all of them before returning anything. */
export function encodeRecords(records: readonly KvpRecord[], options: CodecOptions = {}): Buffer {
  const out = Buffer.alloc(records.length * RECORD_BYTES);
  records.forEach((record, i) => encodeRecordInto(record, out, i * RECORD_BYTES, options));
  return out;
}

function decodeField(field: Buffer, options: DecodeOptions, what: string): string {
  let end = field.length;
  while (end > 0 && field[end - 1] === 0) end--;
  const bytes = field.subarray(0, end);
  if (options.lossy) return lossyDecoder.decode(bytes);
  try {
    return strictDecoder.decode(bytes);
  } catch {
    throw new BootstateError('KVP_FAILED', `kvp ${what} is not valid UTF-8`, {
      data: [['error', `kvp ${what} is not valid UTF-8`]],
    });
  }
}

/** Decodes the record starting at `offset`, stripping trailing NUL padding; strict UTF-8 unless `lossy`. */
export function decodeRecord(buffer: Buffer, offset = 0, options: DecodeOptions = {}): KvpRecord {
  if (buffer.length - offset < RECORD_BYTES) {
    throw new BootstateError('KVP_FAILED', `kvp record at byte ${offset} is truncated`);
  }
  const where = `record at byte ${offset}`;
  return {
    key: decodeField(buffer.subarray(offset, offset + KEY_FIELD_BYTES), options, `key of ${where}`),
    value: decodeField(buffer.subarray(offset + KEY_FIELD_BYTES, offset + RECORD_BYTES), options, `value of ${where}`),
  };
}

/** Decodes every whole record in `buffer`; a torn tail shorter than one record is ignored. */
export function decodeRecords(buffer: Buffer, options: DecodeOptions = {}): KvpRecord[] {
  const count = Math.floor(buffer.length / RECORD_BYTES);
  const out = new Array<KvpRecord>(count);
  for (let i = 0; i < count; i++) out[i] = decodeRecord(buffer, i * RECORD_BYTES, options);
  return out;
}

/** Cuts `text` to at most `maxBytes` UTF-8 bytes without splitting a character. */
export function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  return bytes.subarray(0, boundaryAtOrBefore(bytes, maxBytes)).toString('utf8');
}

/** Splits `value` into chunks of at most `max` UTF-8 bytes, cutting only between characters; `''` gives `['']`. */
export function splitValue(value: string, max = SAFE_VALUE_BYTES): string[] {
  if (!Number.isInteger(max) || max < 4) throw new RangeError(`chunk size must be an integer >= 4, got ${max}`);
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length <= max) return [value];
  const chunks: string[] = [];
  let start = 0;
  while (start < bytes.length) {
    const end = start + max >= bytes.length ? bytes.length : boundaryAtOrBefore(bytes, start + max);
    chunks.push(bytes.subarray(start, end).toString('utf8'));
    start = end;
  }
  return chunks;
}

/** The largest index <= `at` that starts a UTF-8 character (continuation bytes are 10xxxxxx). */
function boundaryAtOrBefore(bytes: Buffer, at: number): number {
  let i = at;
  while (i > 0 && (bytes[i] & 0xc0) === 0x80) i--;
  return i;
}

/** Replaces what a stored field cannot hold (NUL, lone surrogates) so untrusted text never makes an encode fail. */
export function sanitizeText(text: string): string {
  return text.replace(/\0/g, '\\0').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
}
