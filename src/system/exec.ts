/**
 * Runs system commands for the OS backend: an argument array (never a shell), optional stdin bytes, an
 * AbortSignal and a timeout that kill the child's whole process group, and bounded captured output.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { BootstateError } from '../core/errors.js';

export interface RunOptions {
  /** Bytes written to the child's stdin (e.g. `user:password` for chpasswd). Never logged or reported. */
  stdin?: Buffer;
  signal?: AbortSignal;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Cap on each of stdout and stderr kept in memory; the rest is dropped. */
  maxOutputBytes?: number;
  /** Resolve with the result instead of throwing when the command exits non-zero. */
  allowFailure?: boolean;
  /** Niceness given to the child right after it starts (work that must not compete with the boot around it). */
  nice?: number;
}

export interface RunResult {
  argv: string[];
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Why the child ended: it exited on its own, the timeout fired, or the caller aborted. */
  endedBy: 'exit' | 'timeout' | 'abort';
}

/** A function that runs a command; the real one is `run`, tests and the scratch backend pass their own. */
export type Runner = (argv: string[], options?: RunOptions) => Promise<RunResult>;

const DEFAULT_MAX_OUTPUT = 64 * 1024;
const STDERR_TAIL = 512;

/** Starts `command` as the leader of its own process group, at niceness `options.nice` when given. */
function spawnGroup(command: string, args: string[], options: RunOptions): ChildProcessWithoutNullStreams {
  // detached: the child leads its own process group, so abort/timeout can kill it and its descendants.
  // node:child_process is loaded on the first command, so loading it never delays the first IMDS request.
  const child = process.getBuiltinModule('node:child_process').spawn(command, args, {
    detached: true,
    cwd: options.cwd,
    env: withSbinPath(options.env ?? process.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  if (options.nice !== undefined && child.pid !== undefined) {
    try {
      process.getBuiltinModule('node:os').setPriority(child.pid, options.nice);
    } catch {
      // gone already, or not allowed: it runs at our priority
    }
  }
  return child;
}

/** Kills the child's whole process group when the caller aborts or the timeout fires, and remembers which did. */
function guardChild(child: ChildProcessWithoutNullStreams, options: RunOptions): { endedBy: () => RunResult['endedBy']; release: () => void } {
  let endedBy: RunResult['endedBy'] = 'exit';
  const killGroup = (why: 'timeout' | 'abort') => {
    if (endedBy === 'exit') endedBy = why;
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  };
  const onAbort = () => killGroup('abort');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const timer = options.timeoutMs ? setTimeout(() => killGroup('timeout'), options.timeoutMs) : undefined;
  return {
    endedBy: () => endedBy,
    release: () => {
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** Runs `argv` without a shell and resolves with its output, or throws SUBPROCESS_FAILED. */
export function run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
  const [command, ...args] = argv;
  if (!command) return Promise.reject(new TypeError('run: empty argv'));
  const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(subprocessError(argv, 'aborted before start', { endedBy: 'abort' }));
      return;
    }
    const child = spawnGroup(command, args, options);
    const out = new Capture(max);
    const err = new Capture(max);
    let settled = false;
    const guard = guardChild(child, options);
    const cleanup = () => {
      settled = true;
      guard.release();
    };

    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.stdin ?? Buffer.alloc(0));

    child.on('error', (error: NodeJS.ErrnoException) => {
      if (settled) return;
      cleanup();
      reject(subprocessError(argv, error.message, { spawnError: error.code ?? 'spawn' }));
    });
    child.on('close', (exitCode, signal) => {
      if (settled) return;
      cleanup();
      const endedBy = guard.endedBy();
      const result: RunResult = { argv, exitCode, signal, stdout: out.text(), stderr: err.text(), endedBy };
      if (endedBy !== 'exit') {
        reject(subprocessError(argv, `${endedBy === 'timeout' ? 'timed out' : 'aborted'}`, { result }));
      } else if (exitCode !== 0 && !options.allowFailure) {
        reject(subprocessError(argv, `exited with ${exitCode ?? signal}`, { result }));
      } else {
        resolve(result);
      }
    });
  });
}

/** Adds the sbin directories to PATH: useradd, sshd and visudo live there and login shells of non-root users omit them. */
export function withSbinPath(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const dirs = (env.PATH ?? '/usr/bin:/bin').split(':');
  for (const extra of ['/usr/local/sbin', '/usr/sbin', '/sbin']) if (!dirs.includes(extra)) dirs.push(extra);
  return { ...env, PATH: dirs.join(':') };
}

/** Whether an error from `run` means the command itself does not exist (ENOENT on spawn). */
export function isCommandMissing(error: unknown): boolean {
  return error instanceof BootstateError && error.data.some(([k, v]) => k === 'spawn_error' && v === 'ENOENT');
}

/** The first line of a command's stderr tail, for warnings that must stay short. */
/** The first line of a command's message, without the carriage returns some tools (OpenSSH) end lines with. */
export function firstLine(text: string): string {
  return (text.split('\n')[0] ?? '').replace(/\r/g, '').trim();
}

/** The trimmed stderr tail a failed command left, or the error message. */
export function stderrOf(error: unknown): string {
  if (!(error instanceof BootstateError)) return String(error);
  const tail = error.data.find(([k]) => k === 'stderr')?.[1];
  return tail?.trim() ? tail.trim() : error.message;
}

function subprocessError(
  argv: string[],
  what: string,
  extra: { result?: RunResult; spawnError?: string; endedBy?: string },
): BootstateError {
  const data: Array<[string, string]> = [['command', argv.join(' ')]];
  if (extra.result) {
    data.push(['exit_status', String(extra.result.exitCode ?? extra.result.signal ?? 'unknown')]);
    data.push(['ended_by', extra.result.endedBy]);
    data.push(['stderr', extra.result.stderr.slice(-STDERR_TAIL)]);
  }
  if (extra.spawnError) data.push(['spawn_error', extra.spawnError]);
  if (extra.endedBy) data.push(['ended_by', extra.endedBy]);
  return new BootstateError('SUBPROCESS_FAILED', `${argv[0]}: ${what}`, {
    data,
    retryable: extra.result?.endedBy === 'timeout',
  });
}

/** Keeps at most `max` bytes of a stream. */
class Capture {
  #chunks: Buffer[] = [];
  #size = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    if (this.#size >= this.max) return;
    const take = chunk.subarray(0, this.max - this.#size);
    this.#chunks.push(take);
    this.#size += take.length;
  }
  text(): string {
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}
