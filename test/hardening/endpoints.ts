/**
 * Loopback endpoints the fake fabric does not offer: a port nobody listens on, a server that only records (the
 * target of redirects, which must never be reached), and a wireserver that trickles a body to the Ready report.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface Endpoint {
  url: string;
  /** `METHOD url body` of every request that reached it. */
  received: string[];
  /** When each of `received` arrived (ms since the epoch). */
  receivedAt: number[];
  close(): Promise<void>;
}

async function serve(handler: (req: IncomingMessage, res: ServerResponse, body: string) => void): Promise<Endpoint & { server: Server }> {
  const received: string[] = [];
  const receivedAt: number[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    // A request the agent abandons mid-body (its deadline) is simply dropped.
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push(`${req.method} ${req.url} ${body}`);
      receivedAt.push(Date.now());
      handler(req, res, body);
    });
  });
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    received,
    receivedAt,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A loopback port that was just released: connecting to it is refused. */
export async function closedPort(): Promise<number> {
  const probe = await serve(() => undefined);
  const port = Number(new URL(probe.url).port);
  await probe.close();
  return port;
}

/** A server that answers 200 to anything and remembers what reached it. */
export function recorder(): Promise<Endpoint> {
  return serve((_req, res) => res.end('{"reached":"the redirect target"}'));
}

/**
 * A wireserver health endpoint that accepts InProgress at once and answers Ready with a 200 whose 64-byte body
 * arrives one byte per second.
 */
export function tricklingWireserver(): Promise<Endpoint> {
  return serve((_req, res, body) => {
    if (!body.includes('"Ready"')) return void res.end();
    const payload = Buffer.alloc(64, 0x20);
    res.writeHead(200, { 'content-length': String(payload.length) });
    res.flushHeaders();
    let sent = 0;
    const timer = setInterval(() => {
      if (res.destroyed || sent >= payload.length) {
        clearInterval(timer);
        if (!res.destroyed) res.end();
        return;
      }
      res.write(payload.subarray(sent, sent + 1));
      sent += 1;
    }, 1000);
    res.on('close', () => clearInterval(timer));
  });
}
