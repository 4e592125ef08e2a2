/**
 * `bootstate inspect-server`: a relay between agents (`--inspect ws://127.0.0.1:PORT`) and viewers, bound to
 * 127.0.0.1 by default (the stock @statelyai/inspect server listens on every interface). It replays what it
 * buffered to each new viewer, so a viewer that connects after first boot still sees the whole run.
 *
 * Watching a VM's first boot from a laptop: on the VM, start the relay before the agent (e.g. a unit ordered
 * before bootstate) and run `bootstate provision --inspect ws://127.0.0.1:8080`; once the VM is up, from the
 * laptop run `ssh -N -L 8080:127.0.0.1:8080 azureuser@VM` and open http://localhost:8080/ (self-contained
 * viewer) or http://localhost:8080/stately (the hosted Stately inspector; needs internet in the laptop's browser).
 *
 * Agents connect to any path without an `Origin` header (browsers always send one, so a web page cannot pose
 * as an agent); viewers connect to `/view` and must be same-origin, so another site cannot read the stream.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { viewerHtml, statelyBridgeHtml } from './live-viewer.js';

export interface InspectServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Messages replayed to each new viewer. */
  replay?: number;
}

export interface InspectServer {
  host: string;
  port: number;
  /** What agents pass to `--inspect`. */
  agentUrl: string;
  /** What a browser opens. */
  viewerUrl: string;
  close(): Promise<void>;
}

/** Whether a viewer's `Origin` is the page this server served, through whatever tunnel. */
function sameOrigin(request: http.IncomingMessage): boolean {
  const origin = request.headers.origin;
  if (!origin || !request.headers.host) return false;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

/** The viewer with the agent's charts, rendered on the first request (the charts' renderer loads only here). */
async function viewerPage(): Promise<string> {
  const { liveCharts } = await import('./live-charts.js');
  return viewerHtml(await liveCharts());
}

/** Answers a plain HTTP request: the viewer at `/`, the Stately bridge at `/stately`, 404 elsewhere. */
function servePage(request: http.IncomingMessage, response: http.ServerResponse): void {
  const path = new URL(request.url ?? '/', 'http://relay').pathname;
  const page = path === '/' ? viewerPage() : path === '/stately' ? Promise.resolve(statelyBridgeHtml()) : undefined;
  if (!page) {
    response.writeHead(404).end();
    return;
  }
  page.then(
    (html) => {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      response.end(html);
    },
    () => response.writeHead(500).end(),
  );
}

/** What the relay holds: the last messages for new viewers, the viewers, and every open socket. */
interface Relay {
  replayLimit: number;
  buffer: string[];
  viewers: Set<WebSocket>;
  sockets: Set<WebSocket>;
}

/** Takes in one accepted socket: a viewer gets the buffer replayed, an agent's messages go to every viewer. */
function accept(relay: Relay, ws: WebSocket, viewer: boolean): void {
  const { buffer, viewers, sockets } = relay;
  sockets.add(ws);
  ws.on('close', () => {
    sockets.delete(ws);
    viewers.delete(ws);
  });
  ws.on('error', () => {});
  if (viewer) {
    viewers.add(ws);
    for (const message of buffer) ws.send(message);
    return;
  }
  ws.on('message', (data) => {
    const message = Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8');
    buffer.push(message);
    if (buffer.length > relay.replayLimit) buffer.shift();
    for (const client of viewers) if (client.readyState === WebSocket.OPEN) client.send(message);
  });
}

/** Starts the relay and resolves once it listens. */
export async function startInspectServer(options: InspectServerOptions = {}): Promise<InspectServer> {
  const host = options.host ?? '127.0.0.1';
  const relay: Relay = { replayLimit: options.replay ?? 5000, buffer: [], viewers: new Set(), sockets: new Set() };

  const server = http.createServer(servePage);
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });

  server.on('upgrade', (request, socket, head) => {
    const path = new URL(request.url ?? '/', 'http://relay').pathname;
    const viewer = path === '/view';
    if (viewer ? !sameOrigin(request) : request.headers.origin !== undefined) {
      socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => accept(relay, ws, viewer));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    host,
    port,
    agentUrl: `ws://${shown}:${port}`,
    viewerUrl: `http://${shown}:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of relay.sockets) ws.terminate();
        wss.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
