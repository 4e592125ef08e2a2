/**
 * Paths removed synchronously if the process exits while they still exist. A SIGTERM ends a run without waiting for
 * the step it abandoned, so the asynchronous removal in that step's `finally` may never run: temp files and private
 * keys are registered here for as long as they live.
 */
import { rmSync } from 'node:fs';

const pending = new Set<string>();
let hooked = false;

/** Removes every registered path (a file, or a directory with all it holds): the process is exiting. */
export function removeAllOnExit(): void {
  for (const target of pending) {
    try {
      rmSync(target, { recursive: true, force: true });
    } catch {
      // nothing more can be done while exiting
    }
  }
  pending.clear();
}

/**
 * Registers `target` for removal should the process exit; the returned function forgets it (call it once the
 * path is gone or has become the real thing, e.g. renamed into place).
 */
export function removeOnExit(target: string): () => void {
  if (!hooked) {
    process.on('exit', removeAllOnExit);
    hooked = true;
  }
  pending.add(target);
  return () => {
    pending.delete(target);
  };
}
