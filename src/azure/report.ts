/**
 * The encoded provisioning report (`PROVISIONING_REPORT`, docs/protocol.md#provisioning-report): one line of `key=value` fields that the
 * fabric shows the VM owner and that KVP carries to the host.
 *
 * Dialect, chosen to stay readable by azure-init's and cloud-init's consumers:
 * - fields are joined with `|`; each whole `key=value` string is one CSV field;
 * - CR and LF in keys or values are replaced by a space first, so the report is always one line;
 * - a field containing `|` or `"` is wrapped in `"` and each embedded `"` is doubled;
 * - nothing else is quoted or escaped.
 *
 * Field order: `result`, `reason` (failure only), `agent`, the supporting data in the order given, `pps_type`,
 * `vm_id`, `timestamp`, `documentation_url` (failure only). A success report's extra data comes after `timestamp`.
 *
 * The line never exceeds 1022 UTF-8 bytes, the largest value every KVP consumer accepts. When it would, the
 * longest supporting value is cut (at a character boundary, marked with `…`) until it fits; the required fields
 * are never cut, and are kept short by construction (`reason` ≤ 128 bytes, `vm_id` ≤ 64 bytes).
 */
import type { Failure, SupportingData } from '../core/errors.js';
import { AGENT } from '../core/version.js';

export const REPORT_MAX_BYTES = 1022;
export const DOCUMENTATION_URL = 'https://aka.ms/linuxprovisioningerror';
const MARK = '…';
const MARK_BYTES = Buffer.byteLength(MARK);

export interface ReportOptions {
  vmId: string;
  /** The preprovisioning type of this VM (`None`, `Running`, `Savable`, `PreprovisionedOSDisk`, `Unknown`). */
  ppsType?: string;
  /** Defaults to now. */
  timestamp?: Date;
}

/**
 * Encodes the report written when provisioning succeeded.
 *
 * @example
 *   encodeSuccessReport({ vmId }) // 'result=success|agent=bootstate/0.1.0|pps_type=None|vm_id=…|timestamp=…'
 */
export function encodeSuccessReport(options: ReportOptions & { extra?: SupportingData }): string {
  const head: SupportingData = [
    ['result', 'success'],
    ['agent', AGENT],
    ['pps_type', bounded(options.ppsType ?? 'None', 32)],
    ['vm_id', bounded(options.vmId, 64)],
    ['timestamp', formatTimestamp(options.timestamp ?? new Date())],
  ];
  return fit(head, options.extra ?? [], []);
}

/**
 * Encodes the report for a failure; this exact string is also the health report's description.
 *
 * @example
 *   encodeFailureReport(failure('HTTP_STATUS', [['endpoint', url], ['status', '404']]), { vmId })
 */
export function encodeFailureReport(failure: Failure, options: ReportOptions): string {
  const head: SupportingData = [
    ['result', 'error'],
    ['reason', bounded(failure.reason, 128)],
    ['agent', AGENT],
  ];
  const tail: SupportingData = [
    ['pps_type', bounded(options.ppsType ?? 'None', 32)],
    ['vm_id', bounded(options.vmId, 64)],
    ['timestamp', formatTimestamp(options.timestamp ?? new Date())],
    ['documentation_url', DOCUMENTATION_URL],
  ];
  return fit(head, failure.data, tail);
}

/** Formats a time as RFC 3339 UTC with milliseconds and a `+00:00` offset, as azure-init consumers expect. */
export function formatTimestamp(date: Date): string {
  return date.toISOString().replace(/Z$/, '+00:00');
}

/**
 * Splits an encoded report back into its ordered `[key, value]` pairs. Lenient: an unterminated quote runs to the
 * end of the line, a field without `=` has an empty value.
 */
export function decodeReport(line: string): SupportingData {
  const pairs: SupportingData = [];
  if (line === '') return pairs;
  let i = 0;
  while (i <= line.length) {
    let field = '';
    if (line[i] === '"') {
      i += 1;
      while (i < line.length) {
        if (line[i] === '"' && line[i + 1] === '"') {
          field += '"';
          i += 2;
        } else if (line[i] === '"') {
          i += 1;
          break;
        } else {
          field += line[i];
          i += 1;
        }
      }
      const next = line.indexOf('|', i);
      field += line.slice(i, next === -1 ? line.length : next);
      i = next === -1 ? line.length + 1 : next + 1;
    } else {
      const next = line.indexOf('|', i);
      field = line.slice(i, next === -1 ? line.length : next);
      i = next === -1 ? line.length + 1 : next + 1;
    }
    const eq = field.indexOf('=');
    pairs.push(eq === -1 ? [field, ''] : [field.slice(0, eq), field.slice(eq + 1)]);
  }
  return pairs;
}

/** Encodes one `key=value` field in the dialect above. */
function encodeField(key: string, value: string): string {
  const text = `${key}=${value}`.replace(/[\r\n]/g, ' ');
  return /[|"]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

function join(fields: SupportingData): string {
  return fields.map(([k, v]) => encodeField(k, v)).join('|');
}

/** Shrinks supporting values, longest first, until the whole line fits; drops trailing items only as a last resort. */
function fit(head: SupportingData, data: SupportingData, tail: SupportingData): string {
  const items: SupportingData = data.map(([k, v]) => [k.replace(/[\r\n]/g, ' '), v.replace(/[\r\n]/g, ' ')]);
  for (;;) {
    const line = join([...head, ...items, ...tail]);
    const excess = Buffer.byteLength(line) - REPORT_MAX_BYTES;
    if (excess <= 0) return line;
    let longest = -1;
    let longestBytes = MARK_BYTES;
    items.forEach(([, value], index) => {
      const bytes = Buffer.byteLength(value);
      if (bytes > longestBytes) {
        longest = index;
        longestBytes = bytes;
      }
    });
    if (longest === -1) {
      items.pop();
      continue;
    }
    const keep = Math.max(0, longestBytes - excess - MARK_BYTES);
    items[longest] = [items[longest][0], cutUtf8(items[longest][1], keep) + MARK];
  }
}

/** The longest prefix of `value` that fits in `maxBytes` UTF-8 bytes without splitting a character. */
function cutUtf8(value: string, maxBytes: number): string {
  let bytes = 0;
  let out = '';
  for (const ch of value) {
    const size = Buffer.byteLength(ch);
    if (bytes + size > maxBytes) break;
    bytes += size;
    out += ch;
  }
  return out;
}

/** Keeps a required field within its budget so the supporting data always has room. */
function bounded(value: string, maxBytes: number): string {
  return Buffer.byteLength(value) <= maxBytes ? value : cutUtf8(value, maxBytes - MARK_BYTES) + MARK;
}
