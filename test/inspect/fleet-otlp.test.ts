/**
 * The fleet view reading an OpenTelemetry file export: JSON lines of `ExportTraceServiceRequest` in the OTLP/JSON
 * mapping (int64 as decimal strings, AnyValue objects, status codes as numbers), with the span names and attributes
 * the trace export documents for a run. A run per `provision` trace; other services, monitor cycles and traces
 * without a root are counted apart; a line that is not an export request names the file.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { provisioningChart, readFleet, type FleetChart } from '../../src/inspect/fleet-read.js';

let chart: FleetChart;
let dir: string;
beforeAll(async () => {
  chart = await provisioningChart();
});
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-fleet-otlp-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const T0 = 1_765_000_000_000n * 1_000_000n;
const nanos = (ms: number): string => String(T0 + BigInt(ms) * 1_000_000n);
const str = (key: string, value: string) => ({ key, value: { stringValue: value } });
const int = (key: string, value: number) => ({ key, value: { intValue: String(value) } });

let spanCounter = 0;
interface SpanSpec {
  name: string;
  from: number;
  to: number;
  parent?: string;
  attributes?: unknown[];
  error?: string;
}
function span(traceId: string, spec: SpanSpec): Record<string, unknown> & { spanId: string } {
  const spanId = (++spanCounter).toString(16).padStart(16, '0');
  return {
    traceId,
    spanId,
    ...(spec.parent ? { parentSpanId: spec.parent } : {}),
    name: spec.name,
    kind: 1,
    startTimeUnixNano: nanos(spec.from),
    endTimeUnixNano: nanos(spec.to),
    attributes: spec.attributes ?? [],
    status: spec.error ? { code: 2, message: spec.error } : { code: 0 },
  };
}
const request = (service: string, hostId: string, spans: unknown[]) => ({
  resourceSpans: [{ resource: { attributes: [str('service.name', service), str('host.id', hostId)] }, scopeSpans: [{ scope: { name: 'bootstate' }, spans }] }],
});
const state = (traceId: string, parent: string, path: string, from: number, to: number) =>
  span(traceId, { name: path, from, to, parent, attributes: [str('bootstate.state', path)] });

/** A provisioned run: READY=1 at 300 ms (configured entered), Ready accepted at 420 ms, 40 ms of IMDS request. */
function okTrace(traceId: string) {
  const root = span(traceId, { name: 'provision', from: 0, to: 450, attributes: [str('bootstate.result', 'provisioned'), int('bootstate.exit_code', 0)] });
  const imds = state(traceId, root.spanId, 'provisioning.work.gathering.imds.fetching.requesting', 100, 140);
  const configured = state(traceId, root.spanId, 'provisioning.work.configured', 300, 360);
  const ready = state(traceId, root.spanId, 'reportingReady.requesting', 360, 420);
  const report = span(traceId, { name: 'invoke readyReport', from: 360, to: 420, parent: ready.spanId, attributes: [str('bootstate.step', 'readyReport'), str('bootstate.outcome', 'done')] });
  return [root, imds, configured, ready, report];
}

/** A failed run: IMDS retried (two requests of 500 ms, a backoff of 200 ms), reportingFailure entered at 1,300 ms. */
function failedTrace(traceId: string) {
  const root = span(traceId, {
    name: 'provision',
    from: 0,
    to: 1400,
    error: 'operation timed out',
    attributes: [str('bootstate.result', 'failed'), int('bootstate.exit_code', 1), str('error.type', 'TIMEOUT'), str('bootstate.error.reason', 'operation timed out'), str('bootstate.error.cause', 'IMDS did not answer usefully within 1 s')],
  });
  return [
    root,
    state(traceId, root.spanId, 'provisioning.work.gathering.imds.fetching.requesting', 50, 550),
    state(traceId, root.spanId, 'provisioning.work.gathering.imds.fetching.backoff', 550, 750),
    state(traceId, root.spanId, 'provisioning.work.gathering.imds.fetching.requesting', 750, 1250),
    state(traceId, root.spanId, 'reportingFailure.requesting', 1300, 1400),
  ];
}

describe('an OTLP/JSON file export', () => {
  it('gives a run per provision trace, spans of one trace gathered across lines; others counted apart', async () => {
    const [okA, okB] = [okTrace('a'.repeat(32)), okTrace('b'.repeat(32))];
    const failed = failedTrace('c'.repeat(32));
    const lines = [
      request('bootstate', 'vm-a', [...okA.slice(0, 2)]),
      request('bootstate', 'vm-a', [...okA.slice(2)]),
      request('bootstate', 'vm-b', okB),
      request('bootstate', 'vm-c', failed),
      request('bootstate', 'vm-d', [span('d'.repeat(32), { name: 'monitor cycle', from: 0, to: 10 })]),
      request('someone-else', 'x', [span('e'.repeat(32), { name: 'GET /', from: 0, to: 10 })]),
      request('bootstate', 'vm-f', [span('f'.repeat(32), { name: 'reportingReady', from: 0, to: 10, parent: '1234567812345678' })]),
    ];
    const file = path.join(dir, 'traces.json');
    fs.writeFileSync(file, `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
    const { summary, runs } = await readFleet([file], chart);
    expect(summary.runs).toBe(3);
    expect(summary.outcomes).toEqual([
      { key: 'provisioned', count: 2 },
      { key: 'failed', count: 1 },
    ]);
    expect(summary.reasons).toEqual([{ key: 'operation timed out', count: 1, causes: [{ key: 'IMDS did not answer usefully within 1 s', count: 1 }] }]);
    const a = runs.find((run) => run.vmId === 'vm-a')!;
    expect(a).toMatchObject({ ok: true, exitCode: 0, readyMs: 300, acceptedMs: 420, totalMs: 450, source: `${file}#${'a'.repeat(32)}` });
    expect(a.states).toEqual({ 'provisioning.work.gathering.imds.fetching.requesting': 40, 'reportingReady.requesting': 60 });
    const c = runs.find((run) => run.vmId === 'vm-c')!;
    expect(c).toMatchObject({ ok: false, readyMs: 1300, totalMs: 1400 });
    expect(c.acceptedMs).toBeUndefined();
    expect(c.states['provisioning.work.gathering.imds.fetching.requesting']).toBe(1000);
    expect(summary.states[0]).toMatchObject({ state: 'provisioning.work.gathering.imds.fetching.requesting', n: 3, totalMs: 1080, slowestIn: 1 });
    expect(summary.states.find((s) => s.state === 'reportingReady.requesting')).toMatchObject({ n: 2, slowestIn: 2 });
    expect(summary.skipped.map((s) => s.why).sort()).toEqual(['a monitor cycle trace', 'a trace of someone-else']);
    expect(summary.unreadable).toEqual([{ source: `${file}#${'f'.repeat(32)}`, why: 'the trace has no root span' }]);
  });

  it('adds to a step the time of the entries the trace folded (a loop past its 50th), as bootstate.folded_ms tells it', async () => {
    const traceId = '9'.repeat(32);
    const [root, imds, ...rest] = okTrace(traceId);
    imds!.attributes = [...(imds!.attributes as unknown[]), int('bootstate.folded', 70), int('bootstate.folded_ms', 3500)];
    const file = path.join(dir, 'folded.json');
    fs.writeFileSync(file, `${JSON.stringify(request('bootstate', 'vm-9', [root, imds, ...rest]))}\n`);
    const { runs } = await readFleet([file], chart);
    expect(runs[0]!.states['provisioning.work.gathering.imds.fetching.requesting']).toBe(40 + 3500);
  });

  it('names a file whose later line is not an export request, and never throws on mangled requests', async () => {
    const file = path.join(dir, 'mixed.json');
    fs.writeFileSync(file, `${JSON.stringify(request('bootstate', 'vm', okTrace('1'.repeat(32))))}\n{"t":"2026-01-01T00:00:00Z"}\n`);
    expect((await readFleet([file], chart)).summary.unreadable).toEqual([{ source: file, why: 'line 2 is not an ExportTraceServiceRequest' }]);
    await fc.assert(
      fc.asyncProperty(fc.anything(), fc.anything(), async (resourceSpans, spans) => {
        const mangled = [{ resourceSpans: [resourceSpans] }, { resourceSpans: [{ scopeSpans: [{ spans }] }] }, { resourceSpans: [{ scopeSpans: [{ spans: [spans] }] }] }];
        fs.writeFileSync(file, `${mangled.map((line) => JSON.stringify(line) ?? '{}').join('\n')}\n`);
        const { summary } = await readFleet([file], chart);
        expect(summary.runs + summary.unreadable.length + summary.skipped.length).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 60 },
    );
  });
});
