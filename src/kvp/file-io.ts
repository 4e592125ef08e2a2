/** Whole-buffer reads and writes on a pool descriptor, and errno errors turned into KVP_FAILED. */
import fs from 'node:fs';
import { BootstateError } from '../core/errors.js';
import { RECORD_BYTES } from './codec.js';

/** Reads the first `length` bytes of the file, trimmed to whole records if the file shrank meanwhile. */
export function readBytes(fd: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const n = fs.readSync(fd, buffer, done, length - done, done);
    if (n === 0) break;
    done += n;
  }
  return done === length ? buffer : buffer.subarray(0, done - (done % RECORD_BYTES));
}

/** Writes all of `buffer` at `position` (null: at the O_APPEND end), looping over short writes. */
export function writeFully(fd: number, buffer: Buffer, position: number | null): void {
  let done = 0;
  while (done < buffer.length) {
    done += fs.writeSync(fd, buffer, done, buffer.length - done, position === null ? null : position + done);
  }
}

/** Turns an fs error into a KVP_FAILED BootstateError carrying the path and errno; BootstateErrors pass through. */
export function wrapIo(error: unknown, what: string, file: string): BootstateError {
  if (error instanceof BootstateError) return error;
  const errno = (error as NodeJS.ErrnoException).code ?? 'EIO';
  const message = `cannot ${what} kvp pool ${file}: ${(error as Error).message}`;
  return new BootstateError('KVP_FAILED', message, {
    cause: error,
    data: [['error', message], ['path', file], ['errno', errno]],
  });
}
