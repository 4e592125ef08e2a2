/**
 * The IMDS request's head start, with the real actors in the real chart: the media read (and the host keys), which
 * the chart starts beside the IMDS request, wait in `waitingForImds` until the IMDS actor says its request has been
 * written or its attempt has ended (`imds.sent`), or until the chart's `imdsHeadStart` delay for a connection that
 * never completes. The in-progress report does not wait, so a run that fails as soon as IMDS answers has still told
 * the fabric it started. A SimulatedClock keeps the delay from firing unless a test moves it, so the event alone is
 * seen to open the way. Also the bound on provision.ts's own wait for the first request (machines/provisioning/head-start.ts).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer, type Server } from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createActor, SimulatedClock } from 'xstate';
import { afterAll, describe, expect, it } from 'vitest';
import { createProvisioningMachine, IMDS_HEAD_START_MS } from '../../machines/provisioning.js';
import { headStart } from '../../machines/provisioning/head-start.js';
import { provisioningActors, type ProvisioningDeps } from '../../src/provision/actors.js';
import { closeAll } from '../../src/azure/http.js';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { SecretStore } from '../../src/core/secrets.js';
import { backlogFullListener } from '../support/listeners.js';

afterAll(() => closeAll());

/** Whether `promise` has settled by the time the event loop has turned a few times. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('headStart', () => {
  it('holds a waiter until it is opened, then lets every waiter go', async () => {
    const gate = headStart(60_000);
    const first = gate.wait(new AbortController().signal);
    expect(await settled(first)).toBe(false);
    gate.open();
    expect(await settled(first)).toBe(true);
    expect(await settled(gate.wait(new AbortController().signal))).toBe(true);
  });

  it('lets a waiter go after its bound when it is never opened', async () => {
    const gate = headStart(30);
    await gate.wait(new AbortController().signal);
  });

  it('lets a waiter go when its signal aborts', async () => {
    const gate = headStart(60_000);
    const controller = new AbortController();
    const waiting = gate.wait(controller.signal);
    expect(await settled(waiting)).toBe(false);
    controller.abort();
    expect(await settled(waiting)).toBe(true);
  });
});

/** A server that answers every request after `holdMs`. */
async function server(holdMs: number, body: string): Promise<{ url: string; close(): Promise<void> }> {
  const http: Server = createServer((_req, res) => void setTimeout(() => res.end(body), holdMs));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
  return { url, close: () => new Promise((resolve) => http.close(() => resolve())) };
}

const METADATA = JSON.stringify({
  compute: { osProfile: { adminUsername: 'azureuser', computerName: 'web-01', disablePasswordAuthentication: 'true' }, publicKeys: [], vmId: 'x' },
});

/**
 * The chart with the real actors past its start (an Azure VM, no marker), its clock simulated; the media read
 * records when it starts and `mediaRead` settles then; `events` gets the order things happened in.
 */
function runChart(imdsUrl: string, events: string[], reportInProgress = true) {
  let mediaStarted!: () => void;
  const mediaRead = new Promise<void>((resolve) => (mediaStarted = resolve));
  const deps = {
    log: pino({ level: 'silent' }, new Writable({ write: (_c, _e, done) => done() })),
    provisioner: { name: 'test' },
    markers: () => ({}),
    readMedia: async () => {
      events.push('media read');
      mediaStarted();
      return null;
    },
    secrets: new SecretStore(),
    console: () => undefined,
    reporter: { post: async () => (events.push('in-progress report'), { sent: true }) },
    reports: {},
    kvp: null,
  } as unknown as ProvisioningDeps;
  const config: Config = {
    ...DEFAULT_CONFIG,
    imds: { ...DEFAULT_CONFIG.imds, endpoint: `${imdsUrl}/metadata/instance`, connection_timeout_secs: 5 },
    wireserver: { ...DEFAULT_CONFIG.wireserver, report_in_progress: reportInProgress },
    // The host keys wait like the media read; this test watches the media read only.
    steps: { skip: ['host-keys'] },
  };
  const clock = new SimulatedClock();
  const actor = createActor(createProvisioningMachine(provisioningActors(deps)), {
    clock,
    input: { config, startup: { platform: { onAzure: true, why: 'test' }, vmId: '00000000-0000-0000-0000-000000000001', marker: 'none' } },
  });
  actor.start();
  const media = () => (actor.getSnapshot().value as { provisioning: { work: { gathering: { media: string } } } }).provisioning.work.gathering.media;
  return { actor, clock, mediaRead, media };
}

describe('the IMDS request before the media read', () => {
  it('starts the media read once the IMDS request was written, and the in-progress report at once', async () => {
    const imds = await server(200, METADATA);
    const events: string[] = [];
    const written = () => events.push('IMDS request written');
    subscribe('undici:client:sendHeaders', written);
    const run = runChart(imds.url, events);
    try {
      await run.mediaRead;
      expect(events).toEqual(['in-progress report', 'IMDS request written', 'media read']);
      // Nobody waited for IMDS to answer: it is still holding its answer.
      expect(run.actor.getSnapshot().matches({ provisioning: { work: { gathering: { imds: 'fetching' } } } })).toBe(true);
    } finally {
      run.actor.stop();
      unsubscribe('undici:client:sendHeaders', written);
      await imds.close();
    }
  });

  it('starts the media read once an IMDS attempt has ended without its request being written', async () => {
    // A port nobody listens on: the connection is refused, the attempt ends, nothing was written.
    const closed = await server(0, '');
    const url = closed.url;
    await closed.close();
    const events: string[] = [];
    const run = runChart(url, events, false);
    try {
      await run.mediaRead;
      expect(events).toEqual(['media read']);
    } finally {
      run.actor.stop();
    }
  });

  it(`starts the media read after the ${IMDS_HEAD_START_MS} ms head start when the IMDS connection never completes`, async () => {
    const listener = await backlogFullListener();
    if (!listener) throw new Error('python3 is needed to hold a listener with a full accept queue');
    const events: string[] = [];
    const run = runChart(`http://127.0.0.1:${listener.port}`, events, false);
    try {
      expect(await settled(run.mediaRead)).toBe(false);
      expect(run.media()).toBe('waitingForImds');
      run.clock.increment(IMDS_HEAD_START_MS);
      await run.mediaRead;
      expect(events).toEqual(['media read']);
      expect(run.actor.getSnapshot().matches({ provisioning: { work: { gathering: { imds: 'fetching' } } } })).toBe(true);
    } finally {
      run.actor.stop();
      listener.close();
    }
  });
});
