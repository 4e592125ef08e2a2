/**
 * What the agent tells systemd about itself under `Type=notify`: `READY=1` once logins may start, `STATUS=` lines
 * for `systemctl status`, and `EXTEND_TIMEOUT_USEC=` while a healthy start is still waiting on the fabric.
 *
 * Each message is one datagram to `$NOTIFY_SOCKET`, sent by the native addon without forking. Where the addon
 * cannot load, `systemd-notify --pid=<our pid>` sends it instead: as root it may put our PID in the credentials,
 * which `NotifyAccess=main` checks (without it the sender would be the child and systemd would drop the message).
 * Where that is missing too, one warning says so and the rest is dropped (systemd then counts the start as failed:
 * Debian's systemd package ships systemd-notify, so this is a broken image, and the journal says why). Without `$NOTIFY_SOCKET` (not started
 * by systemd, or not as `Type=notify`) every call does nothing and nothing is loaded.
 *
 *   const notify = SdNotifier.fromEnvironment({ warn: (m) => log.warn(m) });
 *   notify.status('waiting for IMDS: attempt 3, 280 s left', 290_000_000);
 *   notify.ready();
 */
import { constants as osConstants } from 'node:os';
import { nativeAddon, nativeAddonStatus, type NativeAddon } from './native-addon.js';
import { isCommandMissing, run, type Runner } from './exec.js';
import { sinceStartMs } from '../core/clock.js';

export interface SdNotifierOptions {
  /** The socket, as `$NOTIFY_SOCKET` names it (`/path` or `@abstract`); undefined: not under systemd. */
  socket: string | undefined;
  /** The PID systemd knows as the unit's main process: ours. */
  pid?: number;
  /** The addon; null forces the systemd-notify(1) fallback. Default: the project's native addon. */
  addon?: () => NativeAddon | null;
  /** The fallback command. */
  systemdNotify?: string;
  runner?: Runner;
  /** Told once when messages cannot be delivered (no addon and no systemd-notify, or the socket refuses them). */
  warn?(message: string): void;
  /** Monotonic milliseconds, for the start deadline already granted. */
  now?: () => number;
}

export class SdNotifier {
  /** Whether there is a socket to tell: false outside systemd, and every call then does nothing. */
  readonly active: boolean;
  private readonly socket: string;
  private readonly pid: number;
  private readonly addon: () => NativeAddon | null;
  private readonly command: string;
  private readonly runner: Runner;
  private readonly warnOnce: (message: string) => void;
  private readySent = false;
  private lastStatus: string | null = null;
  /** Until when (this.now) the extensions sent so far keep the start job alive; systemd never shortens it. */
  private extendedUntil = -Infinity;
  private readonly now: () => number;
  private dead = false;
  /** Fallback sends, one after another so systemd sees them in order. */
  private queue: Promise<void> = Promise.resolve();

  /**
   * The notifier for this process. `$NOTIFY_SOCKET` is taken out of the environment so the commands the agent runs
   * (sshd, systemctl, hostnamectl) cannot speak for the unit.
   */
  static fromEnvironment(options: Omit<SdNotifierOptions, 'socket'> = {}): SdNotifier {
    const socket = process.env.NOTIFY_SOCKET || undefined;
    delete process.env.NOTIFY_SOCKET;
    return new SdNotifier({ ...options, socket });
  }

  constructor(options: SdNotifierOptions) {
    this.active = Boolean(options.socket);
    this.socket = options.socket ?? '';
    this.pid = options.pid ?? process.pid;
    this.addon = options.addon ?? nativeAddon;
    this.command = options.systemdNotify ?? 'systemd-notify';
    this.runner = options.runner ?? run;
    this.now = options.now ?? sinceStartMs;
    let warned = false;
    this.warnOnce = (message) => {
      if (warned) return;
      warned = true;
      options.warn?.(message);
    };
  }

  /** Whether `READY=1` has gone out. */
  get isReady(): boolean {
    return this.readySent;
  }

  /** `READY=1` (with `status` as the STATUS= line), the first time only. */
  ready(status?: string): void {
    if (this.readySent) return;
    this.readySent = true;
    const fields = ['READY=1'];
    if (status !== undefined && status !== this.lastStatus) {
      this.lastStatus = status;
      fields.push(`STATUS=${oneLine(status)}`);
    }
    this.send(fields);
  }

  /**
   * `STATUS=text`, unless it is the line already shown; with `extendUsec` (before READY only: systemd ignores it
   * afterwards) also `EXTEND_TIMEOUT_USEC=`, the start timeout from now on, when that moves the deadline on by more
   * than a second (systemd only ever moves it later).
   */
  status(text: string, extendUsec?: number): void {
    const fields: string[] = [];
    if (text !== this.lastStatus) {
      this.lastStatus = text;
      fields.push(`STATUS=${oneLine(text)}`);
    }
    if (extendUsec !== undefined && !this.readySent) fields.push(...this.extension(extendUsec));
    if (fields.length) this.send(fields);
  }

  /** `EXTEND_TIMEOUT_USEC=usec` alone, when it moves the start deadline on. */
  extendTimeout(usec: number): void {
    const fields = this.extension(usec);
    if (fields.length) this.send(fields);
  }

  private extension(usec: number): string[] {
    const until = this.now() + usec / 1000;
    if (until <= this.extendedUntil + 1000) return [];
    this.extendedUntil = until;
    return [`EXTEND_TIMEOUT_USEC=${Math.max(1, Math.ceil(usec))}`];
  }

  /** Resolves once every fallback send has ended (the addon's are synchronous). */
  flush(): Promise<void> {
    return this.queue;
  }

  private send(fields: string[]): void {
    if (!this.active || this.dead) return;
    const addon = this.addon();
    if (addon) {
      const errno = addon.notify(this.socket, `${fields.join('\n')}\n`);
      if (errno !== 0) this.warnOnce(`cannot tell systemd ${fields.map(name).join(', ')} through ${this.socket}: ${errnoName(errno)}`);
      return;
    }
    this.queue = this.queue.then(() => this.viaCommand(fields));
  }

  private async viaCommand(fields: string[]): Promise<void> {
    if (this.dead) return;
    const argv = [this.command, `--pid=${this.pid}`, ...fields];
    try {
      const result = await this.runner(argv, { env: { ...process.env, NOTIFY_SOCKET: this.socket }, timeoutMs: 5_000, allowFailure: true });
      if (result.exitCode !== 0) {
        this.warnOnce(`systemd-notify ${fields.map(name).join(' ')} failed (exit ${result.exitCode ?? result.signal}): ${result.stderr.trim()}`);
      }
    } catch (error) {
      if (!isCommandMissing(error)) {
        this.warnOnce(`systemd-notify failed: ${(error as Error).message}`);
        return;
      }
      this.dead = true;
      this.warnOnce(
        `systemd is not told when logins may start: the native addon is not in use (${nativeAddonStatus()}) and ${this.command} is missing; ` +
          'under Type=notify systemd counts the start as failed when the agent exits',
      );
    }
  }
}

/** systemd takes a message per line: a status on one line. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ');
}

function name(field: string): string {
  return field.slice(0, field.indexOf('='));
}

function errnoName(errno: number): string {
  return Object.entries(osConstants.errno).find(([, n]) => n === errno)?.[0] ?? `errno ${errno}`;
}
