/**
 * Sending recorded spans (src/observe/trace-export.ts with the SDK of otlp-export.ts) to a real OTLP/HTTP receiver on
 * loopback, in both encodings: every record arrives once, under its parent, with its own times, attributes and status,
 * the resource with it; a receiver that stalls or refuses resolves the export with why, within its deadline, never a
 * rejection.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { OtlpProtocol } from '../../src/observe/otlp-settings.js';
import type { SpanRecord } from '../../src/observe/run-trace.js';
import { exportTrace } from '../../src/observe/trace-export.js';
import { downUrl, startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';

const T0 = Date.UTC(2026, 0, 1);
const RECORDS: SpanRecord[] = [
  { id: 0, parent: null, name: 'provision', kind: 'run', start: T0, end: T0 + 900, attributes: { 'bootstate.result': 'failed', 'error.type': 'TIMEOUT' }, error: 'operation timed out' },
  { id: 1, parent: 0, name: 'gathering', kind: 'state', start: T0 + 1, end: T0 + 800, attributes: { 'bootstate.state': 'gathering' } },
  { id: 2, parent: 1, name: 'invoke imds', kind: 'actor', start: T0 + 2.5, end: T0 + 20, attributes: { 'bootstate.step': 'imds', 'bootstate.attempt': 1, 'http.response.status_code': 503, 'bootstate.error.retryable': true } },
];

let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

describe('exportTrace', () => {
  it.each<OtlpProtocol>(['http/protobuf', 'http/json'])('sends every record once, nested, timed and attributed (%s)', async (protocol) => {
    receiver = await startOtlpReceiver();
    const outcome = await exportTrace(RECORDS, { 'service.name': 'bootstate', 'host.id': 'vm-1' }, { url: `${receiver.url}/v1/traces`, timeoutMs: 5000, protocol });
    expect(outcome).toEqual({ sent: 3 });
    const [trace] = receiver.traces;
    expect(trace!.resource).toMatchObject({ 'service.name': 'bootstate', 'host.id': 'vm-1', 'telemetry.sdk.language': 'nodejs' });
    const byName = new Map(trace!.spans.map((span) => [span.name, span]));
    expect([...byName.keys()].sort()).toEqual(['gathering', 'invoke imds', 'provision']);
    expect(byName.get('provision')!.parentSpanId).toBe('');
    expect(byName.get('gathering')!.parentSpanId).toBe(byName.get('provision')!.spanId);
    expect(byName.get('invoke imds')!.parentSpanId).toBe(byName.get('gathering')!.spanId);
    expect(byName.get('invoke imds')!.start).toBe(BigInt(T0 + 2) * 1_000_000n + 500_000n);
    expect(byName.get('invoke imds')!.end).toBe(BigInt(T0 + 20) * 1_000_000n);
    expect(byName.get('invoke imds')!.attributes).toEqual(RECORDS[2]!.attributes);
    expect(byName.get('provision')!.status).toEqual({ code: 2, message: 'operation timed out' });
    expect(byName.get('invoke imds')!.scope).toBe('bootstate');
  });

  it.each([
    ['stalls', 'stall' as const],
    ['refuses', 'refuse' as const],
  ])('resolves with why when the collector %s, within its deadline', async (_, mode) => {
    receiver = await startOtlpReceiver(mode);
    const outcome = await exportTrace(RECORDS, {}, { url: `${receiver.url}/v1/traces`, timeoutMs: 400, protocol: 'http/protobuf' });
    expect(outcome).toHaveProperty('failed');
    expect((outcome as { failed: string }).failed).toContain(`${receiver.url}/v1/traces`);
  });

  it('resolves with why when nothing listens', async () => {
    const outcome = await exportTrace(RECORDS, {}, { url: `${await downUrl()}/v1/traces`, timeoutMs: 400, protocol: 'http/json' });
    expect(outcome).toHaveProperty('failed');
  });
});
