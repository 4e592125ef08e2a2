/** Small helpers shared by the monitor's loopback tests. */
import { createServer } from 'node:net';
import type { MonitorLog } from '../../src/azure/healthservice.js';

export interface LogLine {
  level: 'debug' | 'info' | 'warn';
  obj: object;
  msg?: string;
}

/** A logger that keeps every line, for asserting what was logged. */
export function recordingLog(): MonitorLog & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    debug: (obj, msg) => lines.push({ level: 'debug', obj, msg }),
    info: (obj, msg) => lines.push({ level: 'info', obj, msg }),
    warn: (obj, msg) => lines.push({ level: 'warn', obj, msg }),
  };
}

/** A loopback port nothing listens on (bound, then released). */
export async function refusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A promise with its resolver, for holding a fake endpoint's answer. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
