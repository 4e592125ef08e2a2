/** One poll of `reprovisiondata` against the fake fabric's pool VM on loopback: "not yet", the claim, and failures. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_OVF_BYTES } from '../../src/core/metadata.js';
import { fetchReprovisionDataOnce, parseReprovisionData, reprovisionUrl } from '../../src/azure/reprovision.js';
import { DEFAULT_CONFIG, type ImdsConfig } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { parseOvfEnv } from '../../src/azure/ovf.js';

let fabric: FakeFabric;
let config: ImdsConfig;
beforeEach(async () => {
  fabric = await startFakeFabric();
  config = { ...DEFAULT_CONFIG.imds, endpoint: fabric.imdsUrl, connection_timeout_secs: 2, request_timeout_secs: 2 };
});
afterEach(async () => {
  await fabric.close();
});

const poll = () => fetchReprovisionDataOnce({ config }).catch((error: unknown) => error as BootstateError);

describe('reprovisiondata', () => {
  it('lives on the IMDS host of the configured endpoint', () => {
    expect(reprovisionUrl('http://169.254.169.254/metadata/instance?api-version=2023-11-15&extended=true')).toBe(
      'http://169.254.169.254/metadata/reprovisiondata?api-version=2019-06-01',
    );
  });

  it('answers 404 (retryable) until the pool VM is claimed, then the customer\'s ovf-env.xml; IMDS switches too', async () => {
    fabric.setPreprovisioned({ type: 'Running', claimAtPoll: 3 });
    const before = await fetch(fabric.imdsUrl, { headers: { Metadata: 'true' } }).then((r) => r.json());
    expect(before.extended.compute.ppsType).toBe('Running');
    expect(before.compute.osProfile.adminUsername).toBe('pooladmin');
    for (const _ of [1, 2]) expect(await poll()).toMatchObject({ code: 'HTTP_STATUS', retryable: true, data: expect.arrayContaining([['status', '404']]) });
    const text = await poll();
    expect(parseOvfEnv(text as string)).toMatchObject({ username: 'customer', hostname: 'customer-vm' });
    const after = await fetch(fabric.imdsUrl, { headers: { Metadata: 'true' } }).then((r) => r.json());
    expect([after.extended.compute.ppsType, after.compute.osProfile.adminUsername]).toEqual(['None', 'customer']);
    const headers = fabric.requestsTo('reprovision').map((r) => r.headers);
    expect(headers.every((h) => h.metadata === 'true' && typeof h['x-ms-client-request-id'] === 'string')).toBe(true);
  });

  it('keeps waiting through 410, 429, 500 and 503 but not through 403, and a refused connection is retryable', async () => {
    fabric.setBehaviour('reprovision', { status: 410 }, { status: 429 }, { status: 500 }, { status: 503 }, { status: 403 });
    const results = [await poll(), await poll(), await poll(), await poll(), await poll()] as BootstateError[];
    expect(results.map((e) => e.retryable)).toEqual([true, true, true, true, false]);
    await fabric.close();
    expect(await poll()).toMatchObject({ code: 'HTTP_TRANSPORT', retryable: true });
    fabric = await startFakeFabric();
  });

  it('ends the wait at the first 200 over the body limit: non-retryable BODY_TOO_LARGE naming the limit, after 1 poll', async () => {
    fabric.setPreprovisioned({ type: 'Running' });
    fabric.setBehaviour('reprovision', { bigBody: 4 * 1024 * 1024 });
    const error = (await poll()) as BootstateError;
    expect(fabric.requestsTo('reprovision')).toHaveLength(1);
    expect([error.code, error.reason, error.exitCode, error.retryable]).toEqual(['BODY_TOO_LARGE', 'response body too large', 1, false]);
    expect(error.data).toEqual([
      ['limit', String(MAX_OVF_BYTES)],
      ['path', '/metadata/reprovisiondata'],
    ]);
  });

  it('never lets a document past the ovf-env.xml size through, whatever max_body_bytes allows', async () => {
    fabric.setBehaviour('reprovision', { status: 200, body: 'x'.repeat(MAX_OVF_BYTES + 1) });
    const error = (await fetchReprovisionDataOnce({ config: { ...config, max_body_bytes: 64 * 1024 * 1024 } }).catch((e: unknown) => e)) as BootstateError;
    expect(error).toMatchObject({ code: 'BODY_TOO_LARGE', retryable: false, data: [['limit', String(MAX_OVF_BYTES)], ['path', '/metadata/reprovisiondata']] });
  });

  it('keeps waiting through a 404 whose page is over the limit', async () => {
    fabric.setBehaviour('reprovision', { status: 404, body: 'x'.repeat(4096) });
    const error = (await fetchReprovisionDataOnce({ config: { ...config, max_body_bytes: 1024 } }).catch((e: unknown) => e)) as BootstateError;
    expect(error).toMatchObject({ code: 'HTTP_STATUS', retryable: true, data: expect.arrayContaining([['status', '404']]) });
  });

  it('ends the wait at a 200 whose body is not UTF-8: non-retryable OVF_INVALID', async () => {
    fabric.setBehaviour('reprovision', 'invalid-utf8');
    expect(await poll()).toMatchObject({ code: 'OVF_INVALID', retryable: false, data: [['problem', 'body is not valid UTF-8']] });
  });

  it.each([
    ['JSON', '{"error":"not yet"}'],
    ['an HTML page', '<html><body>Service Unavailable</body></html>'],
    ['an OVF Environment without a ProvisioningSection', '<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"/>'],
    ['an empty body', ''],
  ])('ends the wait at a 200 with %s: not an Azure ovf-env.xml, non-retryable OVF_INVALID', async (_name, body) => {
    fabric.setBehaviour('reprovision', { status: 200, body, headers: { 'content-type': 'text/xml' } });
    const text = await poll();
    expect(typeof text).toBe('string');
    const error = (await parseReprovisionData(text as string).catch((e: unknown) => e)) as BootstateError;
    expect(error).toBeInstanceOf(BootstateError);
    expect([error.code, error.retryable]).toEqual(['OVF_INVALID', false]);
  });

  it("parses the customer's document as coming from reprovisiondata", async () => {
    fabric.setPreprovisioned({ type: 'Running', claimAtPoll: 1 });
    expect(await parseReprovisionData((await poll()) as string)).toMatchObject({ username: 'customer', device: 'reprovisiondata' });
  });

  it('a claimed fabric with no pool configured is an error of the test, not a silent 404', () => {
    expect(() => fabric.claim()).toThrow(/no pool VM/);
  });
});
