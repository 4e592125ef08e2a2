/**
 * The IMDS request a first boot sends before the chart is loaded, against a real server: it is the one request the
 * first IMDS attempt uses, only for exactly the settings it was sent with, and it is aborted when nobody takes it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FirstImdsRequest } from '../../src/provision/first-imds-request.js';
import { closeAll } from '../../src/azure/http.js';
import { instanceMetadataFrom } from '../../src/azure/imds.js';
import { DEFAULT_CONFIG, type ImdsConfig } from '../../src/config/defaults.js';
import { type FakeFabric, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { backlogFullListener } from '../support/listeners.js';

let fabric: FakeFabric;
let config: ImdsConfig;

beforeAll(async () => {
  fabric = await startFakeFabric();
  config = { ...DEFAULT_CONFIG.imds, endpoint: fabric.imdsUrl, connection_timeout_secs: 2, request_timeout_secs: 5 };
});
afterEach(() => fabric.setImds());
afterAll(async () => {
  await closeAll();
  await fabric.close();
});

const never = () => new AbortController().signal;

/** Runs `body` with an IMDS endpoint whose connections never complete (a listener with a full accept queue). */
async function withHungConnection(body: (endpoint: string) => Promise<void>): Promise<void> {
  const listener = await backlogFullListener();
  if (!listener) throw new Error('python3 is needed to hold a listener with a full accept queue');
  try {
    await body(`http://127.0.0.1:${listener.port}/metadata/instance`);
  } finally {
    listener.close();
  }
}

describe('FirstImdsRequest', () => {
  it('sends one request at once, and its taker reads the metadata from that request', async () => {
    const before = fabric.requestsTo('imds').length;
    const first = new FirstImdsRequest(config);
    await fabric.waitForRequests('imds', before + 1);
    const taken = first.take(never());
    expect(taken).not.toBeNull();
    await taken!.sent;
    const metadata = instanceMetadataFrom(await taken!.response, config);
    expect(metadata.adminUsername).toBeTruthy();
    expect(fabric.requestsTo('imds')).toHaveLength(before + 1);
    expect(fabric.requestsTo('imds').at(-1)!.headers.metadata).toBe('true');
  });

  it('is taken once only', async () => {
    const first = new FirstImdsRequest(config);
    expect(first.take(never())).not.toBeNull();
    expect(first.take(never())).toBeNull();
  });

  it('is aborted by its taker\'s signal', async () => {
    const before = fabric.requestsTo('imds').length;
    fabric.setImds('stall');
    const first = new FirstImdsRequest(config);
    await fabric.waitForRequests('imds', before + 1);
    const owner = new AbortController();
    const taken = first.take(owner.signal)!;
    const aborted = Date.now();
    owner.abort();
    await expect(taken.response).rejects.toMatchObject({ code: 'HTTP_TRANSPORT', data: expect.arrayContaining([['error', 'aborted']]) });
    expect(Date.now() - aborted).toBeLessThan(1000);
  });

  it('is aborted when dropped, and cannot be taken after that', async () => {
    await withHungConnection(async (endpoint) => {
      const first = new FirstImdsRequest({ ...config, endpoint });
      first.drop();
      expect(first.take(never())).toBeNull();
      const started = Date.now();
      await first.written(5_000);
      expect(Date.now() - started).toBeLessThan(1000);
    });
  });

  it('says when it has been written, or gives up after the bound when its connection never completes', async () => {
    const written = new FirstImdsRequest(config);
    await written.written(60_000);
    expect(written.take(never())).not.toBeNull();

    await withHungConnection(async (endpoint) => {
      const hung = new FirstImdsRequest({ ...config, endpoint });
      const started = performance.now();
      await hung.written(50);
      const took = performance.now() - started;
      expect(took).toBeGreaterThanOrEqual(45);
      expect(took).toBeLessThan(2000);
      hung.drop();
    });
  });
});
