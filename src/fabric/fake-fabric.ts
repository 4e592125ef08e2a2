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

/** The goal state's incarnation (the classic agents' `?comp=goalstate`). */
const INCARNATION = 1;

/** What the fake fabric serves and has seen: its services' handlers and the FakeFabric's methods share it. */
interface FabricState {
  options: FakeFabricOptions;
  scripts: Map<RouteName, Script>;
  /** The document IMDS serves on 'ok'. */
  document: unknown;
  pool: { customerDocument: Record<string, any>; customerOvf: string; claimAtPoll?: number } | null;
  /** The customer's ovf-env.xml, once the pool VM is claimed. */
  claimedOvf: string | null;
  imdsDelayMs: number;
  /** The certificates set with setCertificates. */
  bundle: FabricCertificate[];
  requests: RecordedRequest[];
  reports: unknown[];
  healthReports: HealthReport[];
  /** Called on every request (waitForRequests). */
  waiters: Set<() => void>;
  /** The wireserver's base URL, which the goal state links; known once it listens. */
  wireBase?: string;
}

function newFabricState(options: FakeFabricOptions): FabricState {
  return {
    options,
    scripts: new Map<RouteName, Script>(ROUTES.map((r) => [r, new Script()])),
    document: options.imdsDocument ?? exampleImdsDocument(),
    pool: null,
    claimedOvf: null,
    imdsDelayMs: 0,
    bundle: [],
    requests: [],
    reports: [],
    healthReports: [],
    waiters: new Set(),
  };
}

/** Starts the three fabric services and resolves when all of them listen. */
export async function startFakeFabric(options: FakeFabricOptions = {}): Promise<FakeFabric> {
  const state = newFabricState(options);
  const handler = (service: RecordedRequest['service'], req: IncomingMessage, res: ServerResponse) => handle(state, service, req, res);
  const imds = await listen('imds', options.imds, handler);
  const wire = await listen('wireserver', options.wireserver, handler);
  const plugin = await listen('hostPlugin', options.hostPlugin, handler);
  state.wireBase = baseUrl(wire.address);

  const script = (route: RouteName) => state.scripts.get(route)!;
  const requestsTo = (route: RouteName) => requestsOf(state, route);
  return {
    imdsUrl: `${baseUrl(imds.address)}${IMDS_PATH}`,
    healthUrl: `${baseUrl(wire.address)}/provisioning/health`,
    healthServiceUrl: `${baseUrl(wire.address)}/HealthService`,
    hostPluginUrl: baseUrl(plugin.address),
    ports: { imds: imds.address.port, wireserver: wire.address.port, hostPlugin: plugin.address.port },
    requests: state.requests,
    reports: state.reports,
    healthReports: state.healthReports,
    incarnation: INCARNATION,
    setImds: (...b) => script('imds').set(b),
    setWireserver: (...b) => script('health').set(b),
    setHealthService: (...b) => script('healthService').set(b),
    setHostPlugin: (...b) => script('hostPluginHealth').set(b),
    setHostPluginVersions: (...b) => script('hostPluginVersions').set(b),
    setBehaviour: (route, ...b) => script(route).set(b),
    setCertificates: (list) => {
      state.bundle = list;
    },
    setImdsDocument: (doc) => {
      state.document = doc;
    },
    setPreprovisioned: (vm) => preprovision(state, vm),
    claim: () => claim(state),
    delayImds: (ms) => {
      state.imdsDelayMs = ms;
    },
    requestsTo,
    waitForRequests: (route, count, timeoutMs = 10_000) => waitForRequests(state, route, count, timeoutMs),
    idle: (timeoutMs = 5_000) => idle([imds, wire, plugin], timeoutMs),
    close: async () => {
      await Promise.all([imds.close(), wire.close(), plugin.close()]);
    },
  };
}

const baseUrl = (l: Listen) => `http://${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port}`;

const requestsOf = (state: FabricState, route: RouteName) => state.requests.filter((r) => r.route === route);

/** Switches IMDS to the customer's document and `reprovisiondata` to the customer's ovf-env.xml. */
function claim(state: FabricState): void {
  if (!state.pool) throw new Error('fake fabric: no pool VM to claim (setPreprovisioned first)');
  state.document = state.pool.customerDocument;
  state.claimedOvf = state.pool.customerOvf;
}

/** Makes this VM an unclaimed pool VM (FakeFabric.setPreprovisioned). */
function preprovision(state: FabricState, vm: PoolVm): void {
  const customerDocument = vm.customerDocument ?? customerImdsDocument();
  const placeholder = exampleImdsDocument();
  Object.assign(placeholder.compute.osProfile, { adminUsername: 'pooladmin', computerName: 'pool-placeholder' });
  placeholder.extended.compute.ppsType = vm.type ?? 'Running';
  state.document = placeholder;
  state.claimedOvf = null;
  state.pool = {
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
}

/** What a route answers when its script says 'ok'. */
function okAnswer(state: FabricState, route: RouteName, request: RecordedRequest): OkAnswer {
  if (state.wireBase === undefined) throw new Error('fake fabric: the wireserver does not listen yet');
  const json = { 'content-type': 'application/json; charset=utf-8' };
  const name = (state.document as { compute?: { name?: unknown } } | null)?.compute?.name;
  const vmName = typeof name === 'string' && name ? name : 'fabric-vm';
  // A bundle set with setCertificates is linked too (and answered in `handle`, where it can be enveloped).
  const certificates = state.options.certificates ?? (state.bundle.length > 0 ? () => '' : undefined);
  const classicAnswer = classicOkAnswer(route, request, { base: state.wireBase, incarnation: INCARNATION, vmName, certificates });
  if (classicAnswer) return classicAnswer;
  if (route === 'imds') return { status: 200, headers: json, body: Buffer.from(JSON.stringify(state.document)) };
  if (route === 'reprovision') {
    if (state.claimedOvf === null) return { status: 404, headers: json, body: Buffer.from('{"error":"Not found"}') };
    return { status: 200, headers: { 'content-type': 'text/xml; charset=utf-8' }, body: Buffer.from(state.claimedOvf) };
  }
  if (route === 'hostPluginVersions') return { status: 200, headers: json, body: Buffer.from(JSON.stringify(SUPPORTED_VERSIONS)) };
  return { status: 200, headers: {}, body: Buffer.alloc(0) };
}

/** Reads a request to its end and records it. */
async function readRequest(service: RecordedRequest['service'], req: IncomingMessage): Promise<RecordedRequest> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const userAgent = req.headers['user-agent'] ?? '';
  return {
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
}

/** Adds a request to what the fabric has seen (claiming the pool VM at its poll), then wakes the waiters. */
function record(state: FabricState, recorded: RecordedRequest): void {
  const { requests, pool } = state;
  requests.push(recorded);
  if (recorded.route === 'reprovision' && pool?.claimAtPoll !== undefined && state.claimedOvf === null) {
    if (requests.filter((r) => r.route === 'reprovision').length >= pool.claimAtPoll) claim(state);
  }
  if (recorded.route === 'health') state.reports.push(parseOrRaw(recorded.body));
  state.healthReports.push(...healthReportsOf([recorded]));
  state.options.onRequest?.(recorded);
  for (const wake of state.waiters) wake();
}

/** Answers one request to any of the three services, as its route's script says. */
async function handle(state: FabricState, service: RecordedRequest['service'], req: IncomingMessage, res: ServerResponse) {
  const recorded = await readRequest(service, req);
  record(state, recorded);

  if (recorded.route === null) return play(res, { status: 404, body: 'not found' }, okAnswer(state, 'health', recorded), recorded);
  if ((recorded.route === 'imds' || recorded.route === 'reprovision') && String(req.headers.metadata).toLowerCase() !== 'true') {
    return play(res, { status: 400, body: { error: 'Bad request. Required metadata header not specified' } }, okAnswer(state, 'imds', recorded), recorded);
  }
  if (recorded.route === 'imds' && state.imdsDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, state.imdsDelayMs));
  // Certificates set with setCertificates are enveloped per request, to the transport certificate it carries.
  const ok = recorded.route === 'certificates' && state.bundle.length > 0 ? await certificatesAnswer(req, state.bundle) : okAnswer(state, recorded.route, recorded);
  await play(res, state.scripts.get(recorded.route)!.next(), ok, recorded);
}

/** As the wireserver: the bundle is enveloped to the transport certificate the request carries. */
async function certificatesAnswer(req: IncomingMessage, bundle: FabricCertificate[]): Promise<OkAnswer> {
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
}

/** Resolves once `count` requests have reached `route`; rejects after `timeoutMs`. */
function waitForRequests(state: FabricState, route: RouteName, count: number, timeoutMs: number): Promise<RecordedRequest[]> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (requestsOf(state, route).length < count) return;
      cleanup();
      resolve(requestsOf(state, route));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`fake fabric: ${count} request(s) to ${route} did not arrive within ${timeoutMs} ms`));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      state.waiters.delete(check);
    };
    state.waiters.add(check);
    check();
  });
}

/** Resolves once no client holds a connection to any of `services` (FakeFabric.idle). */
async function idle(services: Listening[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (services.reduce((open, service) => open + service.open(), 0) > 0) {
    if (Date.now() > deadline) throw new Error(`fake fabric: connections still open after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // A request read to its end is recorded on the turn its body ends, before its socket's close is handled.
  await new Promise((resolve) => setImmediate(resolve));
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
