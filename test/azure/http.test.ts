import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, request } from '../../src/azure/http.js';
import { BootstateError } from '../../src/core/errors.js';
import { type FakeFabric, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { backlogFullListener } from '../support/listeners.js';

let fabric: FakeFabric;
const TIMEOUT_MS = 200;
const TOLERANCE_MS = 1000;
const base = { connectTimeoutMs: 2000, requestTimeoutMs: TIMEOUT_MS };

beforeAll(async () => {
  fabric = await startFakeFabric();
});
afterEach(() => {
  fabric.setImds();
  fabric.setWireserver();
});
afterAll(async () => {
  await closeAll();
  await fabric.close();
});

/** Runs the request and returns the BootstateError it must reject with, plus how long that took. */
/** Starts `call` and times it from before its first line: a loaded machine's synchronous setup counts, as the timer's does. */
async function failureOf(call: () => Promise<unknown>): Promise<{ error: BootstateError; elapsed: number }> {
  const started = Date.now();
  try {
    await call();
  } catch (error) {
    expect(error).toBeInstanceOf(BootstateError);
    return { error: error as BootstateError, elapsed: Date.now() - started };
  }
  throw new Error('expected the request to fail');
}

const imdsHeaders = { Metadata: 'true' };

describe('request', () => {
  it('returns status, headers and the whole body', async () => {
    const res = await request(fabric.imdsUrl, { ...base, requestTimeoutMs: 5000, headers: imdsHeaders });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('application/json');
    expect(JSON.parse(res.body.toString('utf8')).compute.vmId).toBe('d0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8');
  });

  it('sends the method, headers and body it is given', async () => {
    await request(fabric.healthUrl, { ...base, method: 'POST', headers: { 'x-test': 'yes' }, body: '{"a":1}' });
    const last = fabric.requests.at(-1)!;
    expect(last.method).toBe('POST');
    expect(last.headers['x-test']).toBe('yes');
    expect(last.body).toBe('{"a":1}');
  });

  it('treats a redirect as a plain status and never contacts the other host', async () => {
    const other = await startFakeFabric();
    try {
      fabric.setImds({ status: 302, headers: { location: other.imdsUrl } });
      const res = await request(fabric.imdsUrl, { ...base, headers: imdsHeaders });
      expect(res.status).toBe(302);
      expect(res.headers.location).toBe(other.imdsUrl);
      expect(other.requests).toHaveLength(0);
    } finally {
      await other.close();
    }
  });

  it('ignores proxy environment variables', async () => {
    const proxy = await startFakeFabric();
    const saved = { http: process.env.http_proxy, HTTP: process.env.HTTP_PROXY };
    process.env.http_proxy = proxy.hostPluginUrl;
    process.env.HTTP_PROXY = proxy.hostPluginUrl;
    try {
      const res = await request(fabric.imdsUrl, { ...base, headers: imdsHeaders });
      expect(res.status).toBe(200);
      expect(proxy.requests).toHaveLength(0);
    } finally {
      process.env.http_proxy = saved.http;
      process.env.HTTP_PROXY = saved.HTTP;
      if (saved.http === undefined) delete process.env.http_proxy;
      if (saved.HTTP === undefined) delete process.env.HTTP_PROXY;
      await proxy.close();
    }
  });

  it.each([
    ['stall', 'stall' as const],
    ['headers-then-stall', 'headers-then-stall' as const],
    ['a trickling body', { trickle: 50 }],
  ])('ends an attempt against %s with a request timeout', async (_name, behaviour) => {
    fabric.setImds(behaviour);
    const { error, elapsed } = await failureOf(() => request(fabric.imdsUrl, { ...base, headers: imdsHeaders }));
    expect(error.code).toBe('HTTP_TRANSPORT');
    expect(error.retryable).toBe(true);
    expect(error.data).toContainEqual(['error', 'request timeout']);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + TOLERANCE_MS);
  });

  it.each([
    ['stall', 'stall' as const],
    ['a trickling body', { trickle: 20 }],
  ])('rejects within milliseconds when the caller aborts during %s', async (_name, behaviour) => {
    fabric.setImds(behaviour);
    const controller = new AbortController();
    const pending = failureOf(() =>
      request(fabric.imdsUrl, { ...base, requestTimeoutMs: 60_000, headers: imdsHeaders, signal: controller.signal }),
    );
    await fabric.waitForRequests('imds', fabric.requestsTo('imds').length + 1);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const abortedAt = Date.now();
    controller.abort();
    const { error } = await pending;
    expect(Date.now() - abortedAt).toBeLessThan(100);
    expect(error.data).toContainEqual(['error', 'aborted']);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const { error } = await failureOf(() =>
      request(fabric.imdsUrl, { ...base, headers: imdsHeaders, signal: AbortSignal.abort() }),
    );
    expect(error.data).toContainEqual(['error', 'aborted']);
  });

  it('stops reading a streamed 2xx body past maxBodyBytes: a non-retryable error naming the limit and the path', async () => {
    fabric.setImds({ bigBody: 8 * 1024 * 1024 });
    const { error, elapsed } = await failureOf(() =>
      request(fabric.imdsUrl, { ...base, requestTimeoutMs: 10_000, maxBodyBytes: 64 * 1024, headers: imdsHeaders }),
    );
    expect([error.code, error.reason, error.exitCode, error.retryable]).toEqual(['BODY_TOO_LARGE', 'response body too large', 1, false]);
    expect(error.data).toEqual([
      ['limit', '65536'],
      ['path', '/metadata/instance'],
    ]);
    expect(elapsed).toBeLessThan(2000);
  });

  it('refuses a 2xx with a declared Content-Length past maxBodyBytes without reading it', async () => {
    fabric.setImds({ status: 200, body: 'x'.repeat(5000) });
    const { error } = await failureOf(() => request(fabric.imdsUrl, { ...base, maxBodyBytes: 1024, headers: imdsHeaders }));
    expect(error).toMatchObject({ code: 'BODY_TOO_LARGE', retryable: false, data: [['limit', '1024'], ['path', '/metadata/instance']] });
  });

  it.each([404, 503, 403])('answers a %i with a body past maxBodyBytes as its status, the body dropped', async (status) => {
    fabric.setImds({ status, body: 'x'.repeat(5000) });
    const res = await request(fabric.imdsUrl, { ...base, maxBodyBytes: 1024, headers: imdsHeaders });
    expect([res.status, res.body.length, res.bodyDropped]).toEqual([status, 0, true]);
  });

  it('reports a connection reset in the middle of the body', async () => {
    fabric.setImds('reset-mid-body');
    const { error } = await failureOf(() => request(fabric.imdsUrl, { ...base, requestTimeoutMs: 5000, headers: imdsHeaders }));
    expect(error.code).toBe('HTTP_TRANSPORT');
    expect(error.data).toContainEqual(['error', 'connection reset']);
  });

  it('reports a refused connection', async () => {
    const port = await closedPort();
    const { error } = await failureOf(() => request(`http://127.0.0.1:${port}/x`, base));
    expect(error.data).toContainEqual(['error', 'connection refused']);
    expect(error.retryable).toBe(true);
  });

  it('reports a connect timeout when the listener never completes the handshake', async () => {
    const listener = await backlogFullListener();
    if (!listener) return;
    try {
      const { error, elapsed } = await failureOf(() =>
        request(`http://127.0.0.1:${listener.port}/`, { connectTimeoutMs: TIMEOUT_MS, requestTimeoutMs: 5000 }),
      );
      expect(error.data).toContainEqual(['error', 'connect timeout']);
      // undici's connect timer has a resolution of about one second.
      expect(elapsed).toBeLessThan(TIMEOUT_MS + 2000);
    } finally {
      listener.close();
    }
  });

  it('calls onSent once, as the request is written to its socket, before any answer', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const arrived: string[] = [];
    const server: Server = createServer((req, res) => {
      arrived.push(req.url ?? '');
      void held.then(() => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      let sent = 0;
      const pending = request(`${url}/held?n=1`, { connectTimeoutMs: 2000, requestTimeoutMs: 5000, onSent: () => (sent += 1) });
      // A second request to the same server, written at about the same time, is not this one.
      const other = request(`${url}/other`, { connectTimeoutMs: 2000, requestTimeoutMs: 5000 });
      while (arrived.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(sent).toBe(1);
      release();
      expect((await pending).status).toBe(200);
      await other;
      expect(sent).toBe(1);
    } finally {
      release();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('never calls onSent for a request that is never written, whatever else is written meanwhile', async () => {
    const refused = createServer();
    await new Promise<void>((resolve) => refused.listen(0, '127.0.0.1', resolve));
    const port = (refused.address() as { port: number }).port;
    await new Promise((resolve) => refused.close(resolve));
    let sent = 0;
    const failing = failureOf(() => request(`http://127.0.0.1:${port}/`, { ...base, onSent: () => (sent += 1) }));
    await request(fabric.imdsUrl, { ...base, headers: imdsHeaders });
    expect((await failing).error.data).toContainEqual(['error', 'connection refused']);
    expect(sent).toBe(0);
  });

  it('opens fresh connections after closeAll', async () => {
    await request(fabric.imdsUrl, { ...base, headers: imdsHeaders });
    await closeAll();
    const res = await request(fabric.imdsUrl, { ...base, headers: imdsHeaders });
    expect(res.status).toBe(200);
  });

  it('reuses one connection for attempts with the same timeouts separated by a retry interval', async () => {
    const server: Server = createServer((_req, res) => res.end('ok'));
    const sockets = new Set<Socket>();
    server.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
    try {
      for (let i = 0; i < 3; i++) {
        await request(url, { connectTimeoutMs: 1000, requestTimeoutMs: 1234 });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(sockets.size).toBe(1);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

