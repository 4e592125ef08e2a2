/**
 * A real sd_notify receiver for tests (notify-receiver.py: an AF_UNIX datagram socket with SO_PASSCRED, as systemd
 * listens): every datagram with the sender's PID, for path and abstract addresses.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export interface NotifyMessage {
  /** The sender's PID as the kernel (or a root sender's credentials) gave it. */
  pid: number | null;
  /** The datagram's lines, e.g. `['STATUS=reading the provisioning media', 'EXTEND_TIMEOUT_USEC=…']`. */
  lines: string[];
  /** The receiver's CLOCK_MONOTONIC seconds when it arrived. */
  at: number;
  /** Milliseconds since the epoch when it arrived (to compare with the fake fabric's `receivedAt`). */
  wallMs: number;
}

export interface NotifyReceiver {
  /** The address to put in NOTIFY_SOCKET. */
  address: string;
  messages(): NotifyMessage[];
  /** Every line received so far, in order. */
  lines(): string[];
  /** Resolves with the first message that matches, polling; throws with what arrived after `timeoutMs`. */
  waitFor(match: (message: NotifyMessage) => boolean, timeoutMs?: number): Promise<NotifyMessage>;
  stop(): Promise<void>;
}

const SCRIPT = path.join(import.meta.dirname, 'notify-receiver.py');

/** Starts a receiver bound to `address` (a path, or `@name`) and resolves once it listens. */
export async function startNotifyReceiver(address: string, options: { netns?: string } = {}): Promise<NotifyReceiver> {
  const argv = [...(options.netns ? ['ip', 'netns', 'exec', options.netns] : []), 'python3', SCRIPT, address];
  const child: ChildProcess = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  const received: NotifyMessage[] = [];
  let buffer = '';
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    const fail = (why: string) => reject(new Error(`notify receiver at ${address} ${why}: ${stderr}`));
    child.once('exit', (code) => fail(`exited with ${code}`));
    child.once('error', (error) => fail(error.message));
    child.stdout!.on('data', (d) => {
      buffer += d;
      let newline;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line === 'listening') resolve();
        else {
          const parsed = JSON.parse(line) as { pid: number | null; data: string; at: number; wall: number };
          received.push({ pid: parsed.pid, lines: parsed.data.split('\n').filter(Boolean), at: parsed.at, wallMs: parsed.wall * 1000 });
        }
      }
    });
  });
  return {
    address,
    messages: () => [...received],
    lines: () => received.flatMap((m) => m.lines),
    async waitFor(match, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = received.find(match);
        if (found) return found;
        if (Date.now() > deadline) {
          throw new Error(`no matching sd_notify message within ${timeoutMs} ms; received:\n${received.map((m) => m.lines.join(' | ')).join('\n')}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
