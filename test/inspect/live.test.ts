import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { startLiveInspector } from '../../src/inspect/live.js';
import { SECRET, fixtureMachine, runMachine } from './fixtures.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A real WebSocket server on loopback that keeps every byte it receives. */
async function receiver(): Promise<{ url: string; messages: Buffer[]; closed: Promise<void> }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.on('listening', resolve));
  const messages: Buffer[] = [];
  let onClose!: () => void;
  const closed = new Promise<void>((resolve) => (onClose = resolve));
  wss.on('connection', (ws) => {
    ws.on('message', (data) => messages.push(Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer)));
    ws.on('close', () => onClose());
  });
  cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())));
  const address = wss.address() as { port: number };
  return { url: `ws://127.0.0.1:${address.port}`, messages, closed };
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A loopback server that accepts connections and never answers (the WebSocket handshake never completes). */
async function silentServer(): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}

/** Runs live-child.ts and resolves with its exit code, stdout and how long it took to exit by itself. */
function runChild(args: string[]): Promise<{ code: number | null; stdout: string; ms: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx/esm', path.join(here, 'live-child.ts'), ...args], {
    cwd: path.join(here, '..', '..'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  // Exiting by itself is the assertion (exit code 0); the kill only ends a hang, and a killed child has code null.
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, ms: Date.now() - started });
    }),
  );
}

describe('live inspector', () => {
  it('streams the root actor, each event type and each state value with tags and transitions', async () => {
    const server = await receiver();
    const live = startLiveInspector(server.url);
    await runMachine(fixtureMachine({ failures: 1 }), [live.inspect]);
    await live.stop();
    const messages = server.messages.map((bytes) => JSON.parse(bytes.toString('utf8')));
    expect(messages[0]).toMatchObject({ type: '@xstate.actor', name: 'firstboot' });
    const definition = JSON.parse(messages[0].definition);
    expect(definition.states.work.states.metadata.states.requesting.invoke).toEqual([{ id: 'imds', src: 'fetchMetadata' }]);
    const snapshots = messages.filter((message) => message.type === '@xstate.snapshot');
    expect(snapshots[0].snapshot).toMatchObject({ value: 'marker', tags: ['NotReady/Provisioning'], status: 'active', context: {} });
    expect(snapshots.at(-1).snapshot).toMatchObject({ value: 'provisioned', status: 'done', output: { result: 'provisioned', exitCode: 0 } });
    expect(snapshots.flatMap((message) => message.snapshot.transitions)).toContain(
      'firstboot.work.metadata.backoff -> firstboot.work.metadata.requesting on xstate.after.retryInterval.firstboot.work.metadata.backoff',
    );
    const events = messages.filter((message) => message.type === '@xstate.event').map((message) => message.event);
    expect(events).toContainEqual({ type: 'xstate.error.actor.imds' });
    expect(events.every((event) => Object.keys(event).join() === 'type')).toBe(true);
  });

  it('delivers a run that ended before the connection opened when stopped right away', async () => {
    const server = await receiver();
    const live = startLiveInspector(server.url);
    await runMachine(fixtureMachine({ failures: 0 }), [live.inspect]);
    await live.stop();
    await server.closed;
    const types = server.messages.map((bytes) => JSON.parse(bytes.toString('utf8')).type);
    expect(types[0]).toBe('@xstate.actor');
    expect(types.filter((type) => type === '@xstate.snapshot').length).toBeGreaterThan(3);
  });

  it('never sends a secret held in context, event payloads, actor results, errors or output', async () => {
    const server = await receiver();
    const live = startLiveInspector(server.url);
    await runMachine(fixtureMachine({ failures: 2 }), [live.inspect], [{ type: 'NUDGE', token: SECRET }]);
    await runMachine(fixtureMachine({ failures: 9 }), [live.inspect]);
    await live.stop();
    const bytes = Buffer.concat(server.messages);
    expect(bytes.length).toBeGreaterThan(1000);
    expect(bytes.includes(SECRET)).toBe(false);
    expect(bytes.includes('password')).toBe(false);
  });

  it('stops within a second when the inspector is unreachable', async () => {
    const live = startLiveInspector(`ws://127.0.0.1:${await closedPort()}`, { retryMs: 50 });
    await runMachine(fixtureMachine({ failures: 1 }), [live.inspect]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    await live.stop();
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('lets the agent process exit by itself after stop when the inspector port is closed', async () => {
    const child = await runChild([`ws://127.0.0.1:${await closedPort()}`]);
    expect(child.code).toBe(0);
    const report = JSON.parse(child.stdout.trim());
    expect(report.result).toBe('provisioned');
    expect(report.stopMs).toBeLessThan(1000);
  });

  it('lets the agent process exit by itself even if stop is never called', async () => {
    const child = await runChild([`ws://127.0.0.1:${await closedPort()}`, 'no-stop']);
    expect(child.code).toBe(0);
  });

  it('lets the agent process exit after stop when the inspector host never answers', async () => {
    const child = await runChild([`ws://127.0.0.1:${await silentServer()}`]);
    expect(child.code).toBe(0);
    expect(JSON.parse(child.stdout.trim()).stopMs).toBeLessThan(1000);
  });
});
