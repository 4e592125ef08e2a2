/**
 * The kernel log's tail, as `dmesg` would print it, read without forking and without ever blocking: `/dev/kmsg` is
 * opened non-blocking and read record by record until it has none left (a record overwritten while reading is
 * skipped); a regular file (a saved log) is read from its end. At most `maxBytes` of whole lines are kept, the newest.
 */
import fs from 'node:fs';

/** The tail read, or why there is none (`unreadable: EACCES`). */
export type KernelLogTail = { text: Buffer; cut: boolean } | { unreadable: string };

/** Records read at most from /dev/kmsg (its ring holds a few thousand). */
const MAX_RECORDS = 100_000;
const RECORD = /^(\d+),(\d+),(\d+),[^;]*;([^\n]*)/;

/** One /dev/kmsg record as dmesg prints it: `[   12.345678] message`; other text is kept as it is. */
export function formatKmsgRecord(record: string): string {
  const match = RECORD.exec(record);
  if (!match) return record.replace(/\n+$/, '');
  const usec = Number(match[3]);
  const seconds = `${Math.floor(usec / 1e6)}.${String(usec % 1e6).padStart(6, '0')}`;
  return `[${seconds.padStart(12)}] ${match[4]}`;
}

/** Reads the newest whole lines, at most `maxBytes`, of the kernel log at `file` (default `/dev/kmsg`). */
export function readKernelLogTail(file = '/dev/kmsg', maxBytes = 256 * 1024): KernelLogTail {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
  } catch (error) {
    return { unreadable: (error as NodeJS.ErrnoException).code ?? 'EIO' };
  }
  try {
    const stat = fs.fstatSync(fd);
    return stat.isFile() ? fileTail(fd, stat.size, maxBytes) : kmsgTail(fd, maxBytes);
  } catch (error) {
    return { unreadable: (error as NodeJS.ErrnoException).code ?? 'EIO' };
  } finally {
    fs.closeSync(fd);
  }
}

function fileTail(fd: number, size: number, maxBytes: number): KernelLogTail {
  const length = Math.min(size, maxBytes);
  const buffer = Buffer.alloc(length);
  const n = fs.readSync(fd, buffer, 0, length, size - length);
  let text = buffer.subarray(0, n);
  const cut = size > length;
  if (cut) text = text.subarray(text.indexOf(0x0a) + 1);
  return { text, cut };
}

function kmsgTail(fd: number, maxBytes: number): KernelLogTail {
  // The records as strings, the oldest kept at `first`: a record dropped from the front is only skipped, never
  // shifted out, and the text is joined once at the end.
  const lines: string[] = [];
  let first = 0;
  let kept = 0;
  let cut = false;
  const buffer = Buffer.alloc(16 * 1024);
  for (let i = 0; i < MAX_RECORDS; i++) {
    let n: number;
    try {
      n = fs.readSync(fd, buffer, 0, buffer.length, null);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EPIPE') continue; // overwritten while reading: the next read returns the oldest kept
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK') break;
      throw error;
    }
    if (n === 0) break;
    const line = `${formatKmsgRecord(buffer.toString('utf8', 0, n))}\n`;
    lines.push(line);
    kept += Buffer.byteLength(line);
    while (kept > maxBytes && first < lines.length) {
      kept -= Buffer.byteLength(lines[first]!);
      first++;
      cut = true;
    }
  }
  return { text: Buffer.from(lines.slice(first).join('')), cut };
}
