/**
 * A fake Azure fabric on real sockets: IMDS, the wireserver (provisioning health and HealthService) and the
 * host GA plugin. Integration tests, the demo and the benchmarks drive the agent against it; the namespace e2e
 * tests run it as a process through `serve.ts` on the real link-local addresses.
 *
 * @example
 *   const fabric = await startFakeFabric();
 *   fabric.setImds({ status: 500 }, { status: 500 }, 'ok');   // two 500s, then the document forever
 *   // ... run the agent with imds.endpoint = fabric.imdsUrl, wireserver.health_endpoint = fabric.healthUrl
 *   expect(fabric.reports.at(-1)).toEqual({ state: 'Ready' });
 *   await fabric.close();
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { agentOf, type HealthReport, healthReportsOf } from './agents.js';
import { type Behaviour, type OkAnswer, type RecordedRequest, type RouteName, Script, play } from './behaviours.js';
import { certificatesXml, sealCertificates, type FabricCertificate } from './certificates.js';
import { classicOkAnswer, classicRouteOf } from './classic-wireserver.js';
import { exampleImdsDocument } from './imds-document.js';
import { ovfDocument } from './ovf-document.js';

export type { AgentName, Behaviour, RecordedRequest, RouteName } from './behaviours.js';
export type { HealthReport } from './agents.js';

export interface Listen {
  host: string;
  port: number;
}

export interface FakeFabricOptions {
  /** Where IMDS listens; default 127.0.0.1 on an ephemeral port. */
  imds?: Partial<Listen>;
  /** Where the wireserver listens (`/provisioning/health`, `/HealthService`). */
  wireserver?: Partial<Listen>;
  /** Where the host GA plugin listens (`/health`, `/versions`). */
  hostPlugin?: Partial<Listen>;
  /** The document IMDS serves; default the example of docs/protocol.md#imds-example-document. */
  imdsDocument?: unknown;
  /** Called with every request once its body has arrived (serve.ts appends them to the record file). */
  onRequest?: (request: RecordedRequest) => void;
  /**
   * The Certificates document of the goal state (the XML envelope around the encrypted blob), built per request
   * from the request that asks for it (its transport certificate header). Without it the goal state links none.
   */
  certificates?: (request: RecordedRequest) => string;
}

export interface PoolVm {
  type?: string;
  /** IMDS document after the claim; default the example document for user `customer`, host `customer-vm`. */
  customerDocument?: Record<string, any>;
  /** ovf-env.xml served after the claim; default one matching the customer's document. */
  customerOvf?: string;
  claimAtPoll?: number;
}

export interface FakeFabric {
  /** Full IMDS URL including `api-version=2023-11-15&extended=true`. */
  imdsUrl: string;
  healthUrl: string;
  healthServiceUrl: string;
  /** Base URL of the host plugin, without a trailing slash. */
  hostPluginUrl: string;
  ports: { imds: number; wireserver: number; hostPlugin: number };
  /** Every request in arrival order. */
  requests: RecordedRequest[];
  /** Parsed bodies of `POST /provisioning/health` in arrival order (the raw text when it is not JSON). */
  reports: unknown[];
  /** Every agent's health reports, JSON and XML, in arrival order, each with the agent that sent it. */
  healthReports: HealthReport[];
  /** The goal state's incarnation (the classic agents' `?comp=goalstate`). */
  incarnation: number;
  /** Scripts IMDS: each request takes the next behaviour, the last one repeats; none means 'ok'. */
  setImds(...behaviours: Behaviour[]): void;
  /** Scripts `POST /provisioning/health`. */
  setWireserver(...behaviours: Behaviour[]): void;
  /** Scripts `POST /HealthService`. */
  setHealthService(...behaviours: Behaviour[]): void;
  /** Scripts the host plugin's `GET /health`. */
  setHostPlugin(...behaviours: Behaviour[]): void;
  /** Scripts the host plugin's `GET /versions`. */
  setHostPluginVersions(...behaviours: Behaviour[]): void;
  /** The certificates of the goal state; none (empty) means a goal state without a Certificates URL. */
  setCertificates(certificates: FabricCertificate[]): void;
  /** Scripts any route by name. */
  setBehaviour(route: RouteName, ...behaviours: Behaviour[]): void;
  /** Replaces the document IMDS serves on 'ok'. */
  setImdsDocument(document: unknown): void;
  /**
   * Makes this VM a pool VM of `type` (IMDS `ppsType`, placeholder identity) that `reprovisiondata` answers 404
   * for until claimed: by `claim()`, or by itself at poll number `claimAtPoll`. Claiming switches IMDS to the
   * customer's document and `reprovisiondata` to the customer's ovf-env.xml.
   */
  setPreprovisioned(pool: PoolVm): void;
  /** Claims the pool VM now. */
  claim(): void;
  /** Every IMDS request waits `ms` before its scripted behaviour plays (0: no wait). */
  delayImds(ms: number): void;
  /** Requests that reached one route, in arrival order. */
  requestsTo(route: RouteName): RecordedRequest[];
  /** Resolves once `count` requests have reached `route`. */
  waitForRequests(route: RouteName, count: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /**
   * Resolves once no client holds a connection to any of the services (every request a client sent before it went
   * away has been recorded); rejects after `timeoutMs`. A client killed mid-request is only done when the kernel has
   * closed its sockets and the server has read what was already sent.
   */
  idle(timeoutMs?: number): Promise<void>;
  /** Stops listening and destroys every open connection at once, including stalled ones. */
  close(): Promise<void>;
}

const ROUTES: RouteName[] = [
  'imds', 'reprovision', 'health', 'healthService', 'hostPluginHealth', 'hostPluginVersions', 'versions', 'goalState',
  'hostingEnvironmentConfig', 'sharedConfig', 'extensionsConfig', 'certificates', 'wireHealth', 'telemetry',
  'roleProperties', 'hostPluginVmSettings', 'hostPluginStatus', 'hostPluginLog',
];
const IMDS_PATH = '/metadata/instance?api-version=2023-11-15&extended=true';
const SUPPORTED_VERSIONS = ['2015-09-01', '2012-11-30'];

/** Starts the three fabric services and resolves when all of them listen. */
export async function startFakeFabric(options: FakeFabricOptions = {}): Promise<FakeFabric> {
  const scripts = new Map<RouteName, Script>(
    ROUTES.map((r) => [r, new Script()]),
  );
  let document: unknown = options.imdsDocument ?? exampleImdsDocument();
  let pool: { customerDocument: Record<string, any>; customerOvf: string; claimAtPoll?: number } | null = null;
  let claimedOvf: string | null = null;
  let imdsDelayMs = 0;
  let bundle: FabricCertificate[] = [];
  const claim = () => {
    if (!pool) throw new Error('fake fabric: no pool VM to claim (setPreprovisioned first)');
    document = pool.customerDocument;
    claimedOvf = pool.customerOvf;
  };
  const requests: RecordedRequest[] = [];
  const reports: unknown[] = [];
  const healthReports: HealthReport[] = [];
  const waiters = new Set<() => void>();

  const okAnswer = (route: RouteName, request: RecordedRequest): OkAnswer => {
    const json = { 'content-type': 'application/json; charset=utf-8' };
    const name = (document as { compute?: { name?: unknown } } | null)?.compute?.name;
    const vmName = typeof name === 'string' && name ? name : 'fabric-vm';
    // A bundle set with setCertificates is linked too (and answered in `handle`, where it can be enveloped).
    const certificates = options.certificates ?? (bundle.length > 0 ? () => '' : undefined);
    const classicAnswer = classicOkAnswer(route, request, { base: base(wire.address), incarnation, vmName, certificates });
    if (classicAnswer) return classicAnswer;
    if (route === 'imds') return { status: 200, headers: json, body: Buffer.from(JSON.stringify(document)) };
    if (route === 'reprovision') {
      if (claimedOvf === null) return { status: 404, headers: json, body: Buffer.from('{"error":"Not found"}') };
      return { status: 200, headers: { 'content-type': 'text/xml; charset=utf-8' }, body: Buffer.from(claimedOvf) };
    }
    if (route === 'hostPluginVersions') return { status: 200, headers: json, body: Buffer.from(JSON.stringify(SUPPORTED_VERSIONS)) };
    return { status: 200, headers: {}, body: Buffer.alloc(0) };
  };

  const handle = async (service: RecordedRequest['service'], req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const userAgent = req.headers['user-agent'] ?? '';
    const recorded: RecordedRequest = {
      service,
      route: routeOf(service, req.method ?? '', req.url ?? ''),
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      receivedAt: Date.now(),
      userAgent,
      agent: agentOf(userAgent),
    };
    requests.push(recorded);
    if (recorded.route === 'reprovision' && pool?.claimAtPoll !== undefined && claimedOvf === null) {
      if (requests.filter((r) => r.route === 'reprovision').length >= pool.claimAtPoll) claim();
    }
    if (recorded.route === 'health') reports.push(parseOrRaw(recorded.body));
    healthReports.push(...healthReportsOf([recorded]));
    options.onRequest?.(recorded);
    for (const wake of waiters) wake();

    if (recorded.route === null) return play(res, { status: 404, body: 'not found' }, okAnswer('health', recorded), recorded);
    if ((recorded.route === 'imds' || recorded.route === 'reprovision') && String(req.headers.metadata).toLowerCase() !== 'true') {
      return play(res, { status: 400, body: { error: 'Bad request. Required metadata header not specified' } }, okAnswer('imds', recorded), recorded);
    }
    if (recorded.route === 'imds' && imdsDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, imdsDelayMs));
    // Certificates set with setCertificates are enveloped per request, to the transport certificate it carries.
    const ok = recorded.route === 'certificates' && bundle.length > 0 ? await certificatesAnswer(req) : okAnswer(recorded.route, recorded);
    await play(res, scripts.get(recorded.route)!.next(), ok, recorded);
  };

  // As the wireserver: the bundle is enveloped to the transport certificate the request carries.
  const certificatesAnswer = async (req: IncomingMessage): Promise<OkAnswer> => {
    const transport = req.headers['x-ms-guest-agent-public-x509-cert'];
    const xml = { 'content-type': 'text/xml; charset=utf-8' };
    if (typeof transport !== 'string' || req.headers['x-ms-cipher-name'] !== 'DES_EDE3_CBC') {
      return { status: 400, headers: xml, body: Buffer.from('<Error>no transport certificate</Error>') };
    }
    try {
      return { status: 200, headers: xml, body: Buffer.from(certificatesXml(await sealCertificates(transport, bundle))) };
    } catch {
      return { status: 400, headers: xml, body: Buffer.from('<Error>the transport certificate is not an X.509 certificate</Error>') };
    }
  };

  const imds = await listen('imds', options.imds, handle);
  const wire = await listen('wireserver', options.wireserver, handle);
  const plugin = await listen('hostPlugin', options.hostPlugin, handle);
  const base = (l: Listen) => `http://${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port}`;
  const incarnation = 1;

  const requestsTo = (route: RouteName) => requests.filter((r) => r.route === route);
  return {
    imdsUrl: `${base(imds.address)}${IMDS_PATH}`,
    healthUrl: `${base(wire.address)}/provisioning/health`,
    healthServiceUrl: `${base(wire.address)}/HealthService`,
    hostPluginUrl: base(plugin.address),
    ports: { imds: imds.address.port, wireserver: wire.address.port, hostPlugin: plugin.address.port },
    requests,
    reports,
    healthReports,
    incarnation,
    setImds: (...b) => scripts.get('imds')!.set(b),
    setWireserver: (...b) => scripts.get('health')!.set(b),
    setHealthService: (...b) => scripts.get('healthService')!.set(b),
    setHostPlugin: (...b) => scripts.get('hostPluginHealth')!.set(b),
    setHostPluginVersions: (...b) => scripts.get('hostPluginVersions')!.set(b),
    setBehaviour: (route, ...b) => scripts.get(route)!.set(b),
    setCertificates: (list) => {
      bundle = list;
    },
    setImdsDocument: (doc) => {
      document = doc;
    },
    setPreprovisioned: (vm) => {
      const customerDocument = vm.customerDocument ?? customerImdsDocument();
      const placeholder = exampleImdsDocument();
      Object.assign(placeholder.compute.osProfile, { adminUsername: 'pooladmin', computerName: 'pool-placeholder' });
      placeholder.extended.compute.ppsType = vm.type ?? 'Running';
      document = placeholder;
      claimedOvf = null;
      pool = {
        customerDocument,
        customerOvf:
          vm.customerOvf ??
          ovfDocument({
            username: customerDocument.compute.osProfile.adminUsername,
            hostname: customerDocument.compute.osProfile.computerName,
            keys: (customerDocument.compute.publicKeys as Array<{ keyData: string }>).map((k) => k.keyData),
          }),
        claimAtPoll: vm.claimAtPoll,
      };
    },
    claim,
    delayImds: (ms) => {
      imdsDelayMs = ms;
    },
    requestsTo,
    waitForRequests: (route, count, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (requestsTo(route).length < count) return;
          cleanup();
          resolve(requestsTo(route));
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`fake fabric: ${count} request(s) to ${route} did not arrive within ${timeoutMs} ms`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
    async idle(timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      while (imds.open() + wire.open() + plugin.open() > 0) {
        if (Date.now() > deadline) throw new Error(`fake fabric: connections still open after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      // A request read to its end is recorded on the turn its body ends, before its socket's close is handled.
      await new Promise((resolve) => setImmediate(resolve));
    },
    close: async () => {
      await Promise.all([imds.close(), wire.close(), plugin.close()]);
    },
  };
}

/** Names the route a request is for, or null when the real service would not know it either. */
function routeOf(service: RecordedRequest['service'], method: string, url: string): RouteName | null {
  const path = url.split('?')[0];
  if (service === 'imds') {
    if (method === 'GET' && path === '/metadata/instance') return 'imds';
    return method === 'GET' && path === '/metadata/reprovisiondata' ? 'reprovision' : null;
  }
  if (service === 'wireserver') {
    if (method === 'POST' && path === '/provisioning/health') return 'health';
    if (method === 'POST' && path === '/HealthService') return 'healthService';
    return classicRouteOf(method, path, new URLSearchParams(url.split('?')[1] ?? '').get('comp'), url);
  }
  if (method === 'GET' && path === '/health') return 'hostPluginHealth';
  if (method === 'GET' && path === '/versions') return 'hostPluginVersions';
  if (method === 'GET' && path === '/vmSettings') return 'hostPluginVmSettings';
  if (method === 'PUT' && path === '/status') return 'hostPluginStatus';
  if (method === 'PUT' && path === '/vmAgentLog') return 'hostPluginLog';
  return null;
}

/** The example document as the customer who claims a pool VM configured it. */
export function customerImdsDocument(): Record<string, any> {
  const doc = exampleImdsDocument();
  Object.assign(doc.compute.osProfile, { adminUsername: 'customer', computerName: 'customer-vm' });
  doc.compute.publicKeys[0].path = '/home/customer/.ssh/authorized_keys';
  return doc;
}

function parseOrRaw(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

interface Listening {
  address: Listen;
  /** Connections open now. */
  open(): number;
  close(): Promise<void>;
}

/** Starts one HTTP server that keeps track of its sockets so closing never waits for a stalled answer. */
async function listen(
  service: RecordedRequest['service'],
  where: Partial<Listen> | undefined,
  handle: (service: RecordedRequest['service'], req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<Listening> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    handle(service, req, res).catch(() => res.destroy());
  });
  // Stalls are the point of several behaviours: never let Node's own server timeouts end them.
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.keepAliveTimeout = 5_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const host = where?.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(where?.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  return {
    address: { host, port },
    open: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
