/**
 * The IMDS request's head start (src/run/head-start.ts): the media read, which the chart starts in the same step
 * as the IMDS request, begins only once that request has been written to its socket, its attempt has ended, or
 * IMDS_HEAD_START_MS have passed for a connection that never completes. The in-progress report does not wait, so a
 * run that fails as soon as IMDS answers has still told the fabric it started.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer, type Server } from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createActor, toPromise } from 'xstate';
import { afterAll, describe, expect, it } from 'vitest';
import { HEALTH_IN_PROGRESS } from '../../machines/provisioning.js';
import { headStart } from '../../src/run/head-start.js';
import { IMDS_HEAD_START_MS, provisioningActors, type ProvisioningDeps } from '../../src/actors/provisioning.js';
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
    const started = Date.now();
    await gate.wait(new AbortController().signal);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
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

/** A server that answers every request after `holdMs`, recording each arrival. */
async function server(holdMs: number, body: string): Promise<{ url: string; close(): Promise<void> }> {
  const http: Server = createServer((_req, res) => void setTimeout(() => res.end(body), holdMs));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
  return { url, close: () => new Promise((resolve) => http.close(() => resolve())) };
}

const METADATA = JSON.stringify({
  compute: { osProfile: { adminUsername: 'azureuser', computerName: 'web-01', disablePasswordAuthentication: 'true' }, publicKeys: [], vmId: 'x' },
});

/** The real actors with a media read that records when it starts; `events` gets the order things happened in. */
function actorsFor(events: string[]) {
  const deps = {
    log: pino({ level: 'silent' }, new Writable({ write: (_c, _e, done) => done() })),
    provisioner: { name: 'test' },
    readMedia: async () => {
      events.push('media read');
      return null;
    },
    secrets: new SecretStore(),
    reporter: { post: async () => (events.push('in-progress report'), { sent: true }) },
    reports: {},
  } as unknown as ProvisioningDeps;
  return provisioningActors(deps);
}

function configFor(imdsUrl: string): Config {
  return { ...DEFAULT_CONFIG, imds: { ...DEFAULT_CONFIG.imds, endpoint: `${imdsUrl}/metadata/instance`, connection_timeout_secs: 5 } };
}

describe('the IMDS request before the media read', () => {
  it('starts the media read only after the IMDS request was written, and the in-progress report at once', async () => {
    const imds = await server(200, METADATA);
    const events: string[] = [];
    const written = () => events.push('IMDS request written');
    subscribe('undici:client:sendHeaders', written);
    try {
      const actors = actorsFor(events);
      const config = configFor(imds.url);
      const fetching = createActor(actors.fetchMetadata, { input: { config, attempt: 1, sent: false } }).start();
      const media = createActor(actors.readMedia, { input: { config, claimed: false } }).start();
      const report = createActor(actors.reportHealth, { input: { config, vmId: 'x', health: HEALTH_IN_PROGRESS, failure: null, ppsType: 'None' } }).start();
      await Promise.all([toPromise(media), toPromise(report)]);
      expect(events).toEqual(['in-progress report', 'IMDS request written', 'media read']);
      // Neither waited for IMDS to answer: it is still holding its answer.
      expect(fetching.getSnapshot().status).toBe('active');
      await toPromise(fetching);
    } finally {
      unsubscribe('undici:client:sendHeaders', written);
      await imds.close();
    }
  });

  it(`starts the media read after ${IMDS_HEAD_START_MS} ms when the IMDS connection never completes`, async () => {
    const listener = await backlogFullListener();
    if (!listener) throw new Error('python3 is needed to hold a listener with a full accept queue');
    const events: string[] = [];
    try {
      const actors = actorsFor(events);
      const config = configFor(`http://127.0.0.1:${listener.port}`);
      const fetching = createActor(actors.fetchMetadata, { input: { config, attempt: 1, sent: false } }).start();
      const started = Date.now();
      const media = createActor(actors.readMedia, { input: { config, claimed: false } }).start();
      await toPromise(media);
      expect(events).toEqual(['media read']);
      expect(Date.now() - started).toBeGreaterThanOrEqual(IMDS_HEAD_START_MS - 5);
      expect(fetching.getSnapshot().status).toBe('active');
      fetching.stop();
    } finally {
      listener.close();
    }
  });
});
