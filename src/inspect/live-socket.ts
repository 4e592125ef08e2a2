/**
 * The WebSocket transport for the live inspector. @statelyai/inspect's own adapter reconnects from an error
 * handler through a timer nobody can clear, even after `stop()`, so an agent pointed at an unreachable inspector
 * never exits. This one owns every socket and timer: retries are unref'd, and `close()` ends within a bound.
 */
import { WebSocket } from 'ws';

export interface LiveSocketOptions {
  retryMs?: number;
  /** Messages kept while disconnected; the oldest are dropped beyond it. */
  maxQueue?: number;
  /** How long `close()` waits for queued messages and the closing handshake. */
  closeTimeoutMs?: number;
  /** Told once, at the first failure, that the inspector cannot be used; the run goes on without it. */
  onProblem?: (message: string) => void;
}

/** A reconnecting WebSocket sender whose `close()` always settles promptly. */
export class LiveSocket {
  readonly #url: string;
  readonly #retryMs: number;
  readonly #maxQueue: number;
  readonly #closeTimeoutMs: number;
  #ws: WebSocket | undefined;
  #timer: NodeJS.Timeout | undefined;
  #queue: string[] = [];
  #stopped = false;
  #warned = false;
  readonly #onProblem: (message: string) => void;

  constructor(url: string, options: LiveSocketOptions = {}) {
    this.#url = url;
    this.#retryMs = options.retryMs ?? 1000;
    this.#maxQueue = options.maxQueue ?? 2000;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 800;
    this.#onProblem = options.onProblem ?? (() => {});
  }

  #problem(message: string): void {
    if (this.#warned) return;
    this.#warned = true;
    this.#onProblem(message);
  }

  /** Opens the connection; failures are retried until `close()`. */
  start(): void {
    if (this.#stopped || this.#ws) return;
    let ws: WebSocket;
    try {
      const { protocol } = new URL(this.#url);
      if (protocol !== 'ws:' && protocol !== 'wss:') throw new Error(`expected ws:// or wss://, not ${protocol}//`);
      ws = new WebSocket(this.#url, { handshakeTimeout: 3000 });
    } catch (error) {
      // Not a ws:// or wss:// URL: no retry can help.
      this.#stopped = true;
      this.#problem(`inspector URL ${this.#url} is unusable (${(error as Error).message}); the run goes on without it`);
      return;
    }
    this.#ws = ws;
    ws.on('open', () => {
      for (const text of this.#queue.splice(0)) ws.send(text);
    });
    ws.on('error', (error) => {
      this.#problem(`inspector at ${this.#url} cannot be reached (${error.message}); the run goes on, retrying quietly`);
    });
    ws.on('close', () => {
      if (this.#ws === ws) this.#ws = undefined;
      if (this.#stopped) return;
      this.#timer = setTimeout(() => this.start(), this.#retryMs);
      this.#timer.unref();
    });
  }

  /** Sends now when connected, otherwise queues for the next connection. */
  send(text: string): void {
    if (this.#stopped) return;
    if (this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(text);
    else {
      this.#queue.push(text);
      if (this.#queue.length > this.#maxQueue) this.#queue.shift();
    }
  }

  /**
   * Lets a connection that is open or still opening take the queued messages within the timeout, then closes;
   * never retries afterwards.
   */
  async close(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        const deadline = setTimeout(() => {
          ws.terminate();
          resolve();
        }, this.#closeTimeoutMs);
        ws.once('close', () => {
          clearTimeout(deadline);
          resolve();
        });
        if (ws.readyState === WebSocket.OPEN) ws.close(1000, 'run finished');
        else ws.once('open', () => ws.close(1000, 'run finished'));
      });
    }
    this.#queue = [];
  }
}
