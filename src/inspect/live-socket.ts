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

  constructor(url: string, options: LiveSocketOptions = {}) {
    this.#url = url;
    this.#retryMs = options.retryMs ?? 1000;
    this.#maxQueue = options.maxQueue ?? 2000;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 800;
  }

  /** Opens the connection; failures are retried until `close()`. */
  start(): void {
    if (this.#stopped || this.#ws) return;
    const ws = new WebSocket(this.#url, { handshakeTimeout: 3000 });
    this.#ws = ws;
    ws.on('open', () => {
      for (const text of this.#queue.splice(0)) ws.send(text);
    });
    ws.on('error', () => {});
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
