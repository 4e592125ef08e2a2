/**
 * "Every well-formed answer is judged at once" (docs/protocol.md#imds-retries): the built agent against a fake fabric on
 * loopback whose IMDS answers 200 with something that can never be used. Each run must end in
 * NotReady/ProvisioningFailed naming the limit or the key within seconds — not at the end of a retry budget, and never
 * by polling forever.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { withOsProfile } from '../../src/fabric/imds-document.js';
import { lastFailureDescription, markers, reportKinds, runAgent } from './agent.js';

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

/** Budgets far past the 30 s the report must arrive within: only judging the answer at once can meet it. */
const LONG_BUDGETS = { imds: { total_retry_timeout_secs: 300, retry_interval_secs: 0.1 } };
const WITHIN_MS = 30_000;

/** The supporting data of the ProvisioningFailed report the fabric received, by key. */
function failureReport(): Record<string, string> {
  const description = lastFailureDescription(fabric);
  expect(description, 'a ProvisioningFailed report').toBeDefined();
  return Object.fromEntries(decodeReport(description!));
}

/** Milliseconds from the first request to `route` to the ProvisioningFailed report. */
function msToFailure(route: 'imds' | 'reprovision'): number {
  const failed = fabric.requestsTo('health').find((r) => r.body.includes('ProvisioningFailed'))!;
  return failed.receivedAt - fabric.requestsTo(route)[0]!.receivedAt;
}

describe('an IMDS 200 with a wrongly typed field', () => {
  it('ends in ProvisioningFailed naming the key after one request, within 30 s, exit 78', async () => {
    fabric.setImdsDocument(withOsProfile({ computerName: 42 }));
    const run = await runAgent(fabric, LONG_BUDGETS);
    expect(run.code).toBe(78);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'NotReady/ProvisioningFailed']);
    expect(failureReport()).toMatchObject({
      result: 'error',
      reason: 'invalid IMDS metadata',
      key: 'compute.osProfile.computerName',
      error: 'expected a string, received number',
    });
    expect(fabric.requestsTo('imds')).toHaveLength(1);
    expect(msToFailure('imds')).toBeLessThan(WITHIN_MS);
    expect(markers(run.root)).toEqual([]);
  });

  it('ends the same way for a string where a boolean belongs (hasCustomData: "true")', async () => {
    const doc = withOsProfile({});
    doc.extended.compute.hasCustomData = 'true';
    fabric.setImdsDocument(doc);
    const run = await runAgent(fabric, LONG_BUDGETS);
    expect(run.code).toBe(78);
    expect(failureReport()).toMatchObject({ reason: 'invalid IMDS metadata', key: 'extended.compute.hasCustomData' });
    expect(fabric.requestsTo('imds')).toHaveLength(1);
  });
});

describe('a reprovisiondata 200 over the body limit', () => {
  it('ends the pool wait in ProvisioningFailed naming the limit at that poll, within 30 s, exit 1', async () => {
    fabric.setPreprovisioned({ type: 'Running' });
    fabric.setBehaviour('reprovision', { status: 404 }, { status: 404 }, { bigBody: 4 * 1024 * 1024 });
    const run = await runAgent(fabric, { ...LONG_BUDGETS, extraToml: '[preprovisioning]\npoll_interval_secs = 0.1\n' });
    expect(run.code).toBe(1);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready', 'NotReady/ProvisioningFailed']);
    expect(failureReport()).toMatchObject({
      result: 'error',
      reason: 'response body too large',
      limit: '1048576',
      path: '/metadata/reprovisiondata',
      pps_type: 'Running',
    });
    expect(fabric.requestsTo('reprovision')).toHaveLength(3);
    expect(msToFailure('reprovision')).toBeLessThan(WITHIN_MS);
    expect(markers(run.root)).toEqual([]);
  });

  it('ends the same way for a 200 that is not an Azure ovf-env.xml', async () => {
    fabric.setPreprovisioned({ type: 'Running' });
    fabric.setBehaviour('reprovision', { status: 200, body: '<html><body>maintenance</body></html>', headers: { 'content-type': 'text/html' } });
    const run = await runAgent(fabric, { ...LONG_BUDGETS, extraToml: '[preprovisioning]\npoll_interval_secs = 0.1\n' });
    expect(run.code).toBe(78);
    expect(failureReport()).toMatchObject({ reason: 'error parsing ovf-env.xml', problem: 'root element is not an OVF Environment' });
    expect(fabric.requestsTo('reprovision')).toHaveLength(1);
  });
});
