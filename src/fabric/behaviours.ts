/**
 * How the fake fabric answers one request. Each behaviour reproduces a failure a real endpoint has shown or
 * could show (a stall, a trickle, a reset, a body cut short, an oversized or non-UTF-8 body), so clients are tested
 * against real sockets rather than mocked calls.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

/** One request as the fabric saw it; also the line format of the `--record` file. */
export interface RecordedRequest {
  service: 'imds' | 'wireserver' | 'hostPlugin';
  /** The route it matched, or null for an unknown path (answered 404). */
  route: RouteName | null;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Milliseconds since the epoch when the whole request body had arrived. */
  receivedAt: number;
  /** The User-Agent header ('' when absent). */
  userAgent: string;
  /** The agent that User-Agent names (agents.ts). */
  agent: AgentName;
}

/** The agents a fabric can tell apart by their User-Agent. */
export type AgentName = 'bootstate' | 'WALinuxAgent' | 'cloud-init' | 'unknown';

export type RouteName =
  | 'imds'
  | 'reprovision'
  | 'health'
  | 'healthService'
  | 'hostPluginHealth'
  | 'hostPluginVersions'
  // The classic wireserver protocol the peers speak (goal-state.ts).
  | 'versions'
  | 'goalState'
  | 'hostingEnvironmentConfig'
  | 'sharedConfig'
  | 'extensionsConfig'
  | 'certificates'
  | 'wireHealth'
  | 'telemetry'
  | 'roleProperties'
  | 'hostPluginVmSettings'
  | 'hostPluginStatus'
  | 'hostPluginLog';

export type Behaviour =
  /** The route's normal successful answer (the IMDS document, an empty 200, the versions list). */
  | 'ok'
  /** A fixed answer; an object body is sent as JSON. */
  | { status: number; body?: string | Buffer | object; headers?: Record<string, string> }
  /** Accept the request and never answer. */
  | 'stall'
  /** Send status and headers (with a Content-Length) and never the body. */
  | 'headers-then-stall'
  /** Send the normal answer at this many body bytes per second. */
  | { trickle: number }
  /** Send half of the normal body, then reset the connection. */
  | 'reset-mid-body'
  /** A 200 whose chunked body is this many bytes (no Content-Length, so only a streaming cap stops it). */
  | { bigBody: number }
  /** A 200 whose JSON body holds bytes that are not valid UTF-8. */
  | 'invalid-utf8'
  /** The normal answer cut to its first half, with a Content-Length saying so: valid framing, a body cut short. */
  | 'truncated-body'
  /** The normal answer's headers (its full Content-Length), half its body, then a clean close (FIN, no reset). */
  | 'short-body'
  /** Wait, then answer with `then` (default 'ok'): latency for benchmarks. */
  | { delayMs: number; then?: Behaviour }
  /** Hold the answer until the promise settles, then answer with `then` (default 'ok'). */
  | { gate: Promise<unknown>; then?: Behaviour }
  /** Choose per request, e.g. by body. */
  | ((request: RecordedRequest) => Behaviour);

/** The answer a route gives when everything is fine. */
export interface OkAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A scripted queue of behaviours: each request consumes the next one; the last one repeats forever. */
export class Script {
  #queue: Behaviour[] = [];
  #fallback: Behaviour = 'ok';

  /** Replaces the script; with no behaviours the route answers 'ok' again. */
  set(behaviours: Behaviour[]): void {
    this.#queue = behaviours.slice(0, -1);
    this.#fallback = behaviours.at(-1) ?? 'ok';
  }

  /** Takes the behaviour for the next request. */
  next(): Behaviour {
    return this.#queue.shift() ?? this.#fallback;
  }
}

/** Plays a behaviour on a response; `ok` is what the route answers when nothing is wrong. */
export async function play(
  res: ServerResponse,
  behaviour: Behaviour,
  ok: OkAnswer,
  request: RecordedRequest,
): Promise<void> {
  if (typeof behaviour === 'function') return play(res, behaviour(request), ok, request);
  if (behaviour === 'ok') return send(res, ok.status, ok.headers, ok.body);
  if (behaviour === 'stall') return;
  if (behaviour === 'headers-then-stall') {
    res.writeHead(ok.status, { ...ok.headers, 'content-length': String(Math.max(ok.body.length, 16)) });
    res.flushHeaders();
    return;
  }
  if (behaviour === 'reset-mid-body') {
    const body = ok.body.length >= 64 ? ok.body : Buffer.alloc(4096, 0x20);
    res.writeHead(200, { ...ok.headers, 'content-length': String(body.length) });
    res.write(body.subarray(0, body.length >> 1), () => {
      const socket = res.socket as (typeof res.socket & { resetAndDestroy?: () => void }) | null;
      if (socket?.resetAndDestroy) socket.resetAndDestroy();
      else socket?.destroy();
    });
    return;
  }
  if (behaviour === 'truncated-body') return send(res, ok.status, ok.headers, ok.body.subarray(0, ok.body.length >> 1));
  if (behaviour === 'short-body') {
    res.writeHead(ok.status, { ...ok.headers, 'content-length': String(ok.body.length) });
    res.write(ok.body.subarray(0, ok.body.length >> 1), () => res.socket?.end());
    return;
  }
  if (behaviour === 'invalid-utf8') {
    const body = Buffer.concat([
      Buffer.from('{"compute":{"osProfile":{"adminUsername":"'),
      Buffer.from([0xff, 0xfe, 0xc3, 0x28]),
      Buffer.from('","computerName":"x","disablePasswordAuthentication":"true"},"publicKeys":[]}}'),
    ]);
    return send(res, 200, { 'content-type': 'application/json; charset=utf-8' }, body);
  }
  if ('status' in behaviour) {
    const { status, body, headers = {} } = behaviour;
    const isJson = body !== undefined && typeof body === 'object' && !Buffer.isBuffer(body);
    const bytes = body === undefined ? Buffer.alloc(0) : isJson ? Buffer.from(JSON.stringify(body)) : Buffer.from(body as string | Buffer);
    const type: Record<string, string> = isJson ? { 'content-type': 'application/json; charset=utf-8' } : {};
    return send(res, status, { ...type, ...headers }, bytes);
  }
  if ('trickle' in behaviour) return trickle(res, ok, behaviour.trickle);
  if ('bigBody' in behaviour) return bigBody(res, behaviour.bigBody);
  if ('delayMs' in behaviour) {
    await new Promise((resolve) => setTimeout(resolve, behaviour.delayMs));
    if (!res.destroyed) await play(res, behaviour.then ?? 'ok', ok, request);
    return;
  }
  await behaviour.gate.catch(() => undefined);
  if (!res.destroyed) await play(res, behaviour.then ?? 'ok', ok, request);
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer): void {
  if (res.destroyed) return;
  res.writeHead(status, { ...headers, 'content-length': String(body.length) });
  res.end(body);
}

/** Writes the normal body a few bytes at a time so only a whole-attempt deadline ends it. */
function trickle(res: ServerResponse, ok: OkAnswer, bytesPerSecond: number): Promise<void> {
  const chunk = Math.max(1, Math.round(bytesPerSecond / 10));
  const intervalMs = Math.max(10, (1000 * chunk) / bytesPerSecond);
  res.writeHead(ok.status, { ...ok.headers, 'content-length': String(ok.body.length) });
  res.flushHeaders();
  let offset = 0;
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (res.destroyed || offset >= ok.body.length) {
        clearInterval(timer);
        if (!res.destroyed) res.end();
        resolve();
        return;
      }
      res.write(ok.body.subarray(offset, offset + chunk));
      offset += chunk;
    }, intervalMs);
    res.on('close', () => {
      clearInterval(timer);
      resolve();
    });
  });
}

/** Streams `bytes` of a JSON-looking body, honouring back-pressure, until done or the client goes away. */
async function bigBody(res: ServerResponse, bytes: number): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
  const block = Buffer.alloc(64 * 1024, 0x61);
  let sent = 0;
  res.write('{"pad":"');
  sent += 8;
  while (sent < bytes - 2 && !res.destroyed) {
    const piece = block.subarray(0, Math.min(block.length, bytes - 2 - sent));
    sent += piece.length;
    if (!res.write(piece)) {
      await new Promise<void>((resolve) => {
        // Both listeners go when either fires, so a long body never piles up listeners.
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.once('drain', done);
        res.once('close', done);
      });
    }
  }
  if (!res.destroyed) res.end('"}');
}
