/**
 * Opens a file as what bootstate expects it to be: a regular file with one name. The final component is never
 * followed (O_NOFOLLOW), a FIFO or device is never waited on (O_NONBLOCK, then checked), and a file with another
 * hard link is refused, so no write lands in — and no read copies from — a file planted under a name of ours.
 */
import fs from 'node:fs';

/**
 * Why a path was refused: `symlink`, `not a regular file (fifo)`, `hard link (2 names)`. The message reads
 * `refusing PATH: it is a symlink` or, for a problem that starts with "not", `it is not a regular file (fifo)`.
 */
export class UnexpectedFileError extends Error {
  override readonly name = 'UnexpectedFileError';
  constructor(
    readonly path: string,
    readonly problem: string,
    readonly code = 'EUNEXPECTED',
  ) {
    super(`refusing ${path}: it is ${/^not\b/.test(problem) ? problem : `a ${problem}`}`);
  }
}

export interface OpenRegularOptions {
  /** open(2) access flags besides the safety flags, e.g. `O_WRONLY | O_APPEND | O_CREAT`. */
  flags: number;
  mode?: number;
}

const SAFETY = fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

/** Opens `path` (see the file comment) and returns its descriptor; throws UnexpectedFileError or the errno error. */
export function openRegularSync(path: string, options: OpenRegularOptions): number {
  let fd: number;
  try {
    fd = fs.openSync(path, options.flags | SAFETY, options.mode ?? 0o600);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new UnexpectedFileError(path, 'symlink', 'ELOOP');
    if (code === 'EISDIR') throw new UnexpectedFileError(path, 'directory', 'EISDIR');
    if (code === 'ENXIO') throw new UnexpectedFileError(path, 'not a regular file (fifo or socket)', 'ENXIO');
    throw error;
  }
  try {
    // O_NONBLOCK stays set: it changes nothing for the regular file this check lets through.
    checkRegular(path, fs.fstatSync(fd));
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
  return fd;
}

/** Throws UnexpectedFileError unless `stat` is a regular file with exactly one name. */
export function checkRegular(path: string, stat: fs.Stats): void {
  if (!stat.isFile()) throw new UnexpectedFileError(path, `not a regular file (${kindOf(stat)})`);
  if (stat.nlink > 1) throw new UnexpectedFileError(path, `hard link (${stat.nlink} names)`, 'EMLINK');
}

/** `fifo`, `directory`, `socket`, `character device`, `block device`, `symlink` or `file`. */
export function kindOf(stat: fs.Stats): string {
  if (stat.isFIFO()) return 'fifo';
  if (stat.isDirectory()) return 'directory';
  if (stat.isSocket()) return 'socket';
  if (stat.isCharacterDevice()) return 'character device';
  if (stat.isBlockDevice()) return 'block device';
  if (stat.isSymbolicLink()) return 'symlink';
  return 'file';
}

