// Drops a file's pages from the page cache, so the next process that maps it reads it from disk as on a first boot.
// Why it matters for the single executable: the build writes it in large page-cache folios, and a process mapping
// its code from those folios gets whole folios in its RSS, which inflates its peak RSS, for a binary that a VM,
// whose image was written long before its first boot, always reads from disk instead. Node has no posix_fadvise:
// GNU dd's `iflag=nocache count=0` is POSIX_FADV_DONTNEED over the whole file (coreutils ≥ 8.11), after an fsync,
// since dirty pages cannot be dropped.
import { execFileSync } from 'node:child_process';
import { closeSync, fsyncSync, openSync } from 'node:fs';

/** Writes `file` back and drops its cached pages; throws when dd cannot. */
export function dropFromPageCache(file) {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none'], { stdio: ['ignore', 'ignore', 'pipe'] });
}
