/** One poll of `reprovisiondata` against the fake fabric's pool VM on loopback: "not yet", the claim, and failures. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fetchReprovisionDataOnce, reprovisionUrl } from '../../src/azure/reprovision.js';
import { DEFAULT_CONFIG, type ImdsConfig } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/errors.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { parseOvfEnv } from '../../src/os/ovf.js';

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

  it('a claimed fabric with no pool configured is an error of the test, not a silent 404', () => {
    expect(() => fabric.claim()).toThrow(/no pool VM/);
  });
});
