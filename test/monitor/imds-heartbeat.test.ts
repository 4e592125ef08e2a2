import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkImdsHeartbeat, classifyImdsStatus, validateImdsDocument } from '../../src/monitor/imds-heartbeat.js';
import { AGENT } from '../../src/core/version.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { refusedPort } from './helpers.js';

const validate = (doc: unknown) => validateImdsDocument(JSON.stringify(doc));

describe('IMDS document validation', () => {
  it('accepts a document with a MAC and a private address on the first interface', () => {
    expect(validate(exampleImdsDocument())).toEqual({ ok: true, value: '' });
  });

  it('names the first missing field in the network chain', () => {
    expect(validate({ compute: {} }).value).toBe('Missing field: [network]');
    expect(validate({ network: { interface: [{ ipv4: { ipAddress: [{}] } }] } }).value).toBe('Missing field: [macAddress]');
    expect(validate({ network: { interface: [{ macAddress: '00', ipv4: {} }] } }).value).toBe('Empty field: [ipv4]');
    expect(validate({ network: { interface: [{ macAddress: '00', ipv4: { ipAddress: [{ privateIpAddress: null }] } }] } }).value).toBe(
      'Missing field: [privateIpAddress]',
    );
  });

  it('names the first empty field', () => {
    expect(validate({ network: { interface: [] } }).value).toBe('Empty field: [interface]');
    expect(validate({ network: { interface: [{ macAddress: '', ipv4: {} }] } }).value).toBe('Empty field: [macAddress]');
  });

  it('reports a body that is not JSON as unhealthy', () => {
    const result = validateImdsDocument('<html>');
    expect(result.ok).toBe(false);
    expect(result.value).toMatch(/^JSON parsing failed: /);
  });
});

describe('IMDS status classification', () => {
  it('counts throttling and 4xx client errors as healthy', () => {
    for (const status of [429, 400, 401, 404]) expect(classifyImdsStatus(status).ok).toBe(true);
  });

  it('counts service errors, 410 and statuses that persist through retries as unhealthy', () => {
    for (const status of [500, 503, 504, 410, 403, 205, 206]) expect(classifyImdsStatus(status).ok).toBe(false);
  });
});

describe('IMDS heartbeat over loopback', () => {
  let fabric: FakeFabric;
  beforeEach(async () => {
    fabric = await startFakeFabric();
  });
  afterEach(async () => {
    await fabric.close();
  });
  const origin = () => new URL(fabric.imdsUrl).origin;
  const options = { requestTimeoutMs: 2_000 };

  it('asks the 2018-02-01 instance endpoint with Metadata: true and the health User-Agent', async () => {
    expect(await checkImdsHeartbeat(origin(), options)).toEqual({ ok: true, value: '' });
    const [request] = fabric.requestsTo('imds');
    expect(request.url).toBe('/metadata/instance?api-version=2018-02-01');
    expect(request.headers.metadata).toBe('true');
    expect(request.headers['user-agent']).toBe(`${AGENT}+health`);
  });

  it('carries the validation reason when the document lacks the network section', async () => {
    fabric.setImdsDocument({ compute: { vmId: 'x' } });
    expect(await checkImdsHeartbeat(origin(), options)).toEqual({ ok: false, value: 'Missing field: [network]' });
  });

  it('counts an unreachable IMDS as a client-side problem, hence healthy, with the reason kept', async () => {
    const result = await checkImdsHeartbeat(`http://127.0.0.1:${await refusedPort()}`, options);
    expect(result.ok).toBe(true);
    expect(result.value).toContain('connection refused');
  });

  it('counts a 200 too large to read as an unhealthy observation naming the limit, not as unreachable', async () => {
    fabric.setImds({ bigBody: 4 * 1024 * 1024 });
    const result = await checkImdsHeartbeat(origin(), options);
    expect(result).toEqual({ ok: false, value: 'IMDS document unreadable: response body from /metadata/instance is larger than 1048576 bytes' });
  });

  it('classifies a 500 by its status whatever the size of its error page', async () => {
    fabric.setImds({ status: 500, body: 'x'.repeat(2 * 1024 * 1024) });
    expect(await checkImdsHeartbeat(origin(), options)).toEqual({ ok: false, value: 'IMDS answered HTTP status 500' });
  });

  it('counts 429 as healthy and 500 and 410 as unhealthy', async () => {
    fabric.setImds({ status: 429 }, { status: 500 }, { status: 410 });
    const results = [];
    for (let i = 0; i < 3; i++) results.push((await checkImdsHeartbeat(origin(), options)).ok);
    expect(results).toEqual([true, false, false]);
  });
});
