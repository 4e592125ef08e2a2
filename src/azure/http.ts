/**
 * One HTTP attempt for every fabric client. Deliberately without retries, redirects or proxies: the
 * statechart owns retries and deadlines, a 3xx from a metadata service is an answer rather than a hint, and
 * link-local endpoints must never be sent through a proxy. The attempt is bounded by `requestTimeoutMs`
 * (headers and body together) and by the caller's signal, whichever fires first.
 */
// undici's index evaluates all of undici (fetch, WebSocket, mocks, caches) and Node's own bundled copy with it;
// one Agent and the request API are all a fabric client needs.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import Agent from 'undici/lib/dispatcher/agent.js';
import dispatchRequest from 'undici/lib/api/api-request.js';
import type { Dispatcher } from 'undici';
import { BootstateError } from '../core/errors.js';
import { withDeadline } from '../core/signals.js';

export interface HttpRequestOptions {
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: string | Buffer;
  connectTimeoutMs: number;
  /** Budget for the whole attempt: connect, headers and body. */
  requestTimeoutMs: number;
  /**
   * Reading stops once the body grows past this many bytes (declared or received): a 2xx answer is then a
   * BODY_TOO_LARGE error, any other answer is returned as its status with an empty body.
   */
  maxBodyBytes?: number;
  /**
   * false: the answer is its status and headers; the body is dropped unread, so a slow, huge or broken body
   * cannot turn an accepted request into a failure (health reports). Default true.
   */
  readBody?: boolean;
  signal?: AbortSignal;
  /** Called once, as the request is written to its socket; never if it is not (no connection, aborted first). */
  onSent?: () => void;
}

/** undici's diagnostics channel for a request about to be written to its socket, in the same tick as the write. */
const SEND_HEADERS = 'undici:client:sendHeaders';

/** What undici publishes on SEND_HEADERS: the request's fields this module matches on. */
interface SendHeadersMessage {
  request: { origin: unknown; path: string; method: string };
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The body was over `maxBodyBytes` and dropped unread (only ever on an answer that is not 2xx). */
  bodyDropped?: true;
}

/** Why a transport attempt failed; the value of the `error` supporting data item. */
export type TransportFailure =
  | 'connect timeout'
  | 'request timeout'
  | 'connection reset'
  | 'connection refused'
  | 'aborted'
  | 'network unreachable'
  | 'transport error';

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
const dispatchers = new Map<string, Agent>();

/**
 * Returns the shared dispatcher for these timeouts so sequential attempts reuse their connection. undici's
 * connect timer has a resolution of about a second; the whole-attempt timer below is exact.
 */
function dispatcherFor(connectTimeoutMs: number, requestTimeoutMs: number): Agent {
  const key = `${connectTimeoutMs}/${requestTimeoutMs}`;
  let agent = dispatchers.get(key);
  if (!agent) {
    agent = new Agent({
      connect: { timeout: connectTimeoutMs },
      headersTimeout: requestTimeoutMs,
      bodyTimeout: requestTimeoutMs,
      keepAliveTimeout: 4_000,
      // Node's default, given here because the bundles leave node:http out of undici
      // (scripts/build/stubs/undici-http.cjs).
      maxHeaderSize: 16_384,
    });
    dispatchers.set(key, agent);
  }
  return agent;
}

/** Closes every cached connection; call once when the run ends so the process can exit. */
export async function closeAll(): Promise<void> {
  const agents = [...dispatchers.values()];
  dispatchers.clear();
  await Promise.all(agents.map((agent) => agent.destroy().catch(() => undefined)));
}

/** Builds the error for a failed attempt, with the failure kind as supporting data. */
function transportError(url: string, kind: TransportFailure, cause?: unknown): BootstateError {
  const detail = kind === 'transport error' ? `: ${causeCode(cause)}` : '';
  return new BootstateError('HTTP_TRANSPORT', `${kind}${detail} (${new URL(url).origin})`, {
    data: [
      ['error', kind],
      ['endpoint', url],
    ],
    retryable: true,
    cause,
  });
}

/** The most specific code or message an undici or socket error carries. */
function causeCode(error: unknown): string {
  const e = error as { code?: string; message?: string; cause?: { code?: string } } | undefined;
  return e?.cause?.code ?? e?.code ?? e?.message ?? String(error);
}

/** Maps an undici or socket error to the transport failure a person would name. */
function classify(error: unknown): TransportFailure {
  const e = error as { code?: string; cause?: { code?: string } } | undefined;
  switch (e?.code ?? e?.cause?.code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timeout';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return 'request timeout';
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return 'connection reset';
    case 'ENETUNREACH':
    case 'EHOSTUNREACH':
      return 'network unreachable';
    default:
      return 'transport error';
  }
}

/** A 2xx answer whose body is over the limit: the answer itself is unusable, so asking again cannot help. */
function bodyTooLarge(url: string, limit: number): BootstateError {
  const { pathname } = new URL(url);
  return new BootstateError('BODY_TOO_LARGE', `response body from ${pathname} is larger than ${limit} bytes`, {
    data: [
      ['limit', String(limit)],
      ['path', pathname],
    ],
  });
}

/** Thrown out of the body loop; `request` turns it into an error (2xx) or a status-only response. */
class BodyTooLarge extends Error {}

const isSuccess = (status: number) => status >= 200 && status <= 299;

/** The bound of one attempt: the caller's signal or the whole-attempt timer, whichever fires first. */
interface AttemptBound {
  signal: AbortSignal;
  /** Rejects once `signal` fires, whatever state the socket is in. */
  aborted: Promise<never>;
  /** The whole-attempt timer fired (rather than the caller's signal). */
  timedOut: () => boolean;
  /** Stops the timer and the abort listener. */
  release: () => void;
}

function boundAttempt(requestTimeoutMs: number, callerSignal: AbortSignal | undefined): AttemptBound {
  const deadline = withDeadline(callerSignal, requestTimeoutMs, { unref: true });
  const signal = deadline.signal;

  // undici honours the signal, but a promise that settles on abort makes the bound independent of
  // whatever state the socket is in.
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new Error('aborted'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  return {
    signal,
    aborted,
    timedOut: deadline.timedOut,
    release: () => {
      deadline.clear();
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * Calls `onSent` once, as undici writes this request (method, path, origin) to its socket. Returns what stops
 * listening; it does nothing once the request was seen.
 */
function watchSent(target: URL, path: string, method: string, onSent: () => void): () => void {
  let sent: ((message: unknown) => void) | null = null;
  const stop = () => {
    if (sent) unsubscribe(SEND_HEADERS, sent);
    sent = null;
  };
  sent = (message) => {
    const { request: written } = message as SendHeadersMessage;
    if (written.method !== method || written.path !== path || String(written.origin) !== target.origin) return;
    stop();
    onSent();
  };
  subscribe(SEND_HEADERS, sent);
  return stop;
}

/** Reads an answer's body up to `maxBodyBytes`, or drops it unread when `readBody` is false. */
async function readAnswer(res: Dispatcher.ResponseData, maxBodyBytes: number, readBody: boolean): Promise<HttpResponse> {
  if (!readBody) {
    discard(res.body);
    return { status: res.statusCode, headers: flattenHeaders(res.headers), body: Buffer.alloc(0) };
  }
  const headers = flattenHeaders(res.headers);
  // Only a success's body is its answer; any other status is the answer, whatever page comes with it.
  const tooLarge = (): HttpResponse => {
    discard(res.body);
    if (isSuccess(res.statusCode)) throw new BodyTooLarge();
    return { status: res.statusCode, headers, body: Buffer.alloc(0), bodyDropped: true };
  };
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBodyBytes) return tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > maxBodyBytes) return tooLarge();
    chunks.push(chunk as Buffer);
  }
  return { status: res.statusCode, headers, body: Buffer.concat(chunks) };
}

/**
 * Sends one request and reads the whole response body.
 *
 * @example
 *   const res = await request(url, { connectTimeoutMs: 2000, requestTimeoutMs: 5000, signal });
 *   if (res.status === 200) JSON.parse(res.body.toString('utf8'));
 */
export async function request(url: string, options: HttpRequestOptions): Promise<HttpResponse> {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const bound = boundAttempt(options.requestTimeoutMs, options.signal);
  let stopWatching: () => void = () => undefined;
  const attempt = async (): Promise<HttpResponse> => {
    const target = new URL(url);
    const path = target.pathname + target.search;
    const method = options.method ?? 'GET';
    if (options.onSent) stopWatching = watchSent(target, path, method, options.onSent);
    const dispatcher = dispatcherFor(options.connectTimeoutMs, options.requestTimeoutMs);
    const res = await dispatchRequest.call(dispatcher, {
      origin: target.origin,
      path,
      method,
      headers: options.headers,
      body: options.body,
      signal: bound.signal,
    });
    return readAnswer(res, maxBodyBytes, options.readBody !== false);
  };

  try {
    const pending = attempt();
    pending.catch(() => undefined);
    return await Promise.race([pending, bound.aborted]);
  } catch (error) {
    if (error instanceof BodyTooLarge) throw bodyTooLarge(url, maxBodyBytes);
    if (options.signal?.aborted) throw transportError(url, 'aborted', error);
    if (bound.timedOut()) throw transportError(url, 'request timeout', error);
    throw transportError(url, classify(error), error);
  } finally {
    bound.release();
    stopWatching();
  }
}

/** Drops a body we will not read; undici reports the destruction as an error nobody needs to see. */
function discard(body: NodeJS.ReadableStream & { destroy(): void }): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** Joins repeated headers so callers and logs see one string per name. */
function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}
