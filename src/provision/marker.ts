/**
 * The provisioned marker (docs/protocol.md#provisioned-marker) and the durable "report pending" state:
 * `<data_dir>/<vm_id>.provisioned` `<data_dir>/<vm_id>.report-pending` and, for a pool VM,
 * `<data_dir>/<vm_id>.waiting-for-reuse` (`.waiting-for-reuse-savable` for a Savable pool VM, whose name is how a resumed
 * run knows its type; `.waiting-for-shutdown` for an OS-disk pool VM): empty files. A new VM id finds none of them. An empty file has no content to
 * tear, so it is created in place rather than through a temp file and a rename; what each one must survive decides its
 * fsyncs (docs/durability.md): report-pending is durable before Ready is sent (file and directory fsync); provisioned
 * needs only its directory entry durable before report-pending is removed, and that removal needs none, because
 * `provisioned` wins when both are found.
 */
import { constants, lstatSync, readdirSync, rmSync } from 'node:fs';
import { chmod, mkdir, open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError } from '../core/errors.js';
import type { MarkerState, MarkerStore } from '../os/provisioner.js';
import { syncDir } from '../system/atomic.js';
import { checkRegular, kindOf, UnexpectedFileError } from '../system/open-regular.js';
import type { Config } from '../config/defaults.js';

const PROVISIONED = '.provisioned';
const PENDING = '.report-pending';
const WAITING = '.waiting-for-reuse';
const WAITING_SAVABLE = '.waiting-for-reuse-savable';
const SHUTDOWN = '.waiting-for-shutdown';

/** Whether a data-directory entry is one of the markers (what `clean` and `deprovision` remove). */
export const isMarkerName = (name: string): boolean => name.endsWith(PROVISIONED) || name.endsWith(PENDING) || name.endsWith(WAITING) || name.endsWith(WAITING_SAVABLE) || name.endsWith(SHUTDOWN);

/**
 * Where azure-init keeps its `<vm_id>.provisioned` marker by default (its `[azure_init_data_dir] path`). An image
 * migrated from azure-init must not provision a VM azure-init already provisioned.
 */
export const AZURE_INIT_DATA_DIR = '/var/lib/azure-init';

/** A MarkerStore over one data directory (created 0700, marker files 0600), also reading peers' provisioned markers. */
export class FileMarkerStore implements MarkerStore {
  /** `peerDirs`: other agents' data directories whose `<vm_id>.provisioned` also counts (read only, never cleaned). */
  constructor(readonly dataDir: string, readonly peerDirs: readonly string[] = []) {}

  /**
   * `provisioned` (ours or a peer's) wins over `report-pending`, then `waiting-for-reuse`; names match
   * case-insensitively. Our own `provisioned` also removes stale pending and waiting markers of the same VM id.
   * Read with synchronous calls: this runs before the first IMDS request, when the instance lock in the same
   * directory has just been taken synchronously, and the first asynchronous file call of a run starts libuv's
   * thread pool and loads Node's fs/promises module, which the media read can pay for later.
   * `tidy: false` only looks (`bootstate gate`: the stale files are the run's to tidy).
   */
  async state(vmId: string, options: { tidy?: boolean } = {}): Promise<MarkerState> {
    const want = vmId.toLowerCase();
    const names = this.#namesNow('read') ?? [];
    const found = (suffix: string) => names.filter((n) => n.toLowerCase() === want + suffix);
    const provisioned = found(PROVISIONED);
    const pending = found(PENDING);
    const waiting = found(WAITING);
    const savable = found(WAITING_SAVABLE);
    const shutdown = found(SHUTDOWN);
    for (const name of [...provisioned, ...pending, ...waiting, ...savable, ...shutdown]) this.#checkRegular(name);
    if (provisioned.length > 0) {
      if (options.tidy === false) return 'provisioned';
      // A crash between writing `provisioned` and removing the others leaves them behind: provisioned wins, so they
      // are stale, and are tidied here (best effort: a read-only data dir still reads as provisioned).
      for (const name of [...pending, ...waiting, ...savable, ...shutdown]) {
        try {
          rmSync(path.join(this.dataDir, name), { force: true });
        } catch {
          // left for the next boot
        }
      }
      return 'provisioned';
    }
    for (const dir of this.peerDirs) {
      if (namesIn(dir).some((n) => n.toLowerCase() === want + PROVISIONED)) return 'provisioned';
    }
    if (pending.length > 0) return 'report-pending';
    // Only a Savable VM writes its own name: with both (no run writes both), Savable's waits are the safer resumption.
    if (savable.length > 0) return 'waiting-for-reuse-savable';
    if (waiting.length > 0) return 'waiting-for-reuse';
    if (shutdown.length > 0) return 'waiting-for-shutdown';
    return 'none';
  }

  /**
   * A marker is an empty regular file we wrote: anything else under its name was planted, and is refused — as a
   * failure to read that marker (its path in the report), not to write one.
   */
  #checkRegular(name: string): void {
    const file = path.join(this.dataDir, name);
    try {
      const stat = lstatSync(file);
      if (stat.isSymbolicLink()) throw new UnexpectedFileError(file, 'symlink');
      if (!stat.isFile()) throw new UnexpectedFileError(file, `not a regular file (${kindOf(stat)})`);
      checkRegular(file, stat);
    } catch (error) {
      throw markerReadError(file, (error as Error).message, error);
    }
  }

  /** Records that provisioning finished but Ready was not yet accepted, so the next boot only reports. */
  async markReportPending(vmId: string): Promise<void> {
    await this.#create(vmId.toLowerCase() + PENDING, { syncFile: true });
  }

  /**
   * Durable before the wait starts: a reboot that lost it would report Ready to the pool a second time. A Savable
   * VM's marker has a name of its own, so that a resumed run waits for its NIC and reports its type.
   */
  async markWaitingForReuse(vmId: string, ppsType?: string): Promise<void> {
    await this.#create(vmId.toLowerCase() + (ppsType === 'Savable' ? WAITING_SAVABLE : WAITING), { syncFile: true });
  }

  /** Durable before the wait for the host's shutdown: a boot that finds it knows the VM was started again. */
  async markWaitingForShutdown(vmId: string): Promise<void> {
    await this.#create(vmId.toLowerCase() + SHUTDOWN, { syncFile: true });
  }

  /** Records that Ready was accepted, then drops the pending and waiting states. */
  async markProvisioned(vmId: string): Promise<void> {
    // Ready was accepted: losing this marker in a crash only means Ready is sent once more on the next boot.
    await this.#create(vmId.toLowerCase() + PROVISIONED, { syncFile: false });
    const names = this.#namesNow('write') ?? [];
    const done = [PENDING, WAITING, WAITING_SAVABLE, SHUTDOWN].map((suffix) => vmId.toLowerCase() + suffix);
    const pending = names.filter((n) => done.includes(n.toLowerCase()));
    try {
      for (const name of pending) await rm(path.join(this.dataDir, name), { force: true });
    } catch (error) {
      throw markerError(`cannot remove report-pending marker: ${(error as Error).message}`, error);
    }
  }

  /** Removes every marker (and the log file with `logs`); a missing data dir is an error, a missing log is not. */
  async clean(options: { logs: boolean; logPath: string }): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.dataDir);
    } catch (error) {
      throw markerError(`cannot read data directory ${this.dataDir}: ${(error as Error).message}`, error);
    }
    const removed: string[] = [];
    try {
      for (const name of names.filter(isMarkerName)) {
        const file = path.join(this.dataDir, name);
        await rm(file);
        removed.push(file);
      }
      if (options.logs && options.logPath) {
        try {
          await rm(options.logPath);
          removed.push(options.logPath);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        }
      }
    } catch (error) {
      throw markerError(`clean failed: ${(error as Error).message}`, error);
    }
    return removed;
  }

  /**
   * The data directory's entries, or null when it does not exist yet. `read`: listed to learn the markers' state
   * (a failure is a failure to read them); `write`: listed while writing one.
   */
  #namesNow(purpose: 'read' | 'write'): string[] | null {
    try {
      return readdirSync(this.dataDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      const message = `cannot read data directory ${this.dataDir}: ${(error as Error).message}`;
      throw purpose === 'read' ? markerReadError(this.dataDir, message, error) : markerError(message, error);
    }
  }

  /** Creates the empty marker `name` (0600) and makes its directory entry durable. */
  async #create(name: string, options: { syncFile: boolean }): Promise<void> {
    const file = path.join(this.dataDir, name);
    try {
      await mkdir(this.dataDir, { recursive: true, mode: 0o700 });
      await chmod(this.dataDir, 0o700);
      const handle = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
      try {
        const stat = await handle.stat();
        if (!stat.isFile()) throw new UnexpectedFileError(file, `not a regular file (${kindOf(stat)})`);
        checkRegular(file, stat);
        if (stat.size > 0) await handle.truncate(0);
        await handle.chmod(0o600);
        if (options.syncFile) await handle.sync();
      } finally {
        await handle.close();
      }
      await syncDir(this.dataDir);
    } catch (error) {
      throw markerError(`cannot write ${name}: ${(error as Error).message}`, error);
    }
  }
}

function markerError(message: string, cause: unknown): BootstateError {
  return new BootstateError('MARKER_FAILED', message, { data: [['error', message]], cause });
}

/** Reading the markers' state failed: `file` is the marker (or the data directory when it cannot be listed). */
function markerReadError(file: string, message: string, cause: unknown): BootstateError {
  return new BootstateError('MARKER_READ_FAILED', message, { data: [['path', file], ['error', message]], cause });
}

/** A peer's directory entries; none when it cannot be read (a peer that never ran has no directory). */
function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The marker store of a run: our data directory, and azure-init's provisioned markers. */
export const markerStore = (config: Config): FileMarkerStore => new FileMarkerStore(config.data_dir.path, [AZURE_INIT_DATA_DIR]);
