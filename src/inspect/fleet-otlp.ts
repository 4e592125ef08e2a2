/**
 * Runs from an OpenTelemetry file export: JSON lines, each an `ExportTraceServiceRequest` in the OTLP/JSON mapping
 * (`resourceSpans[].resource.attributes`, `scopeSpans[].spans[]` with `traceId`, `parentSpanId`, `name`,
 * `startTimeUnixNano`, `endTimeUnixNano`, `attributes`, `status`), as the collector's file exporter writes them.
 * A run is the spans sharing one `traceId` under `service.name = bootstate` whose root (no `parentSpanId`) is
 * named `provision` (as the trace export documents its spans): its outcome from the root's `bootstate.result`, `bootstate.exit_code`,
 * `bootstate.error.reason` and `bootstate.error.cause`; READY=1 at the first span of a state that tells systemd
 * READY=1; Ready accepted at the end of the `invoke readyReport` span that did not fail; each step's time from its
 * state spans. Anything else in the file (another service, a monitor cycle) is skipped; a trace without its root is
 * named unreadable.
 */
import { inReadyState, type FleetChart } from './fleet-chart.js';
import type { FleetRun, Unreadable } from './fleet-stats.js';
import { stateName } from './words.js';

type ReadResult = { run: FleetRun } | { unreadable: Unreadable } | { skipped: Unreadable };

interface Span {
  traceId: string;
  parent: string;
  name: string;
  start: number;
  end: number;
  attributes: Map<string, string | number | boolean>;
  error: boolean;
  message?: string;
}

interface Trace {
  service?: string;
  hostId?: string;
  spans: Span[];
}

const STATUS_ERROR = 2;
const READY_REPORT_SPAN = 'invoke readyReport';

/** Whether a parsed line is an OTLP/JSON trace export rather than a journal line. */
export function isOtlpExport(raw: unknown): boolean {
  return !!raw && typeof raw === 'object' && Array.isArray((raw as { resourceSpans?: unknown }).resourceSpans);
}

/** An AnyValue of the JSON mapping as a plain value: int64 comes as a decimal string, the rest as themselves. */
function anyValue(value: unknown): string | number | boolean | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.stringValue === 'string') return v.stringValue;
  if (typeof v.boolValue === 'boolean') return v.boolValue;
  if (v.intValue !== undefined && Number.isFinite(Number(v.intValue))) return Number(v.intValue);
  if (typeof v.doubleValue === 'number') return v.doubleValue;
  return undefined;
}

function attributesOf(list: unknown): Map<string, string | number | boolean> {
  const out = new Map<string, string | number | boolean>();
  if (!Array.isArray(list)) return out;
  for (const item of list) {
    const key = (item as { key?: unknown } | null)?.key;
    const value = anyValue((item as { value?: unknown } | null)?.value);
    if (typeof key === 'string' && value !== undefined) out.set(key, value);
  }
  return out;
}

/** Unix nanoseconds (a decimal string or a number) as milliseconds. */
function nanosToMs(value: unknown): number {
  if (typeof value === 'number') return value / 1e6;
  if (typeof value === 'string' && /^\d{1,20}$/.test(value)) return Number(BigInt(value) / 1000n) / 1000;
  return Number.NaN;
}

/** One span of the JSON mapping, or undefined when it lacks what a run needs (ids, a name, its times). */
function spanOf(raw: unknown): Span | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const s = raw as Record<string, unknown>;
  const start = nanosToMs(s.startTimeUnixNano);
  const end = nanosToMs(s.endTimeUnixNano);
  if (typeof s.traceId !== 'string' || typeof s.name !== 'string' || !Number.isFinite(start) || !Number.isFinite(end)) return undefined;
  const status = (s.status && typeof s.status === 'object' ? s.status : {}) as { code?: unknown; message?: unknown };
  const span: Span = {
    traceId: s.traceId,
    parent: typeof s.parentSpanId === 'string' ? s.parentSpanId : '',
    name: s.name,
    start,
    end: Math.max(start, end),
    attributes: attributesOf(s.attributes),
    error: status.code === STATUS_ERROR || status.code === 'STATUS_CODE_ERROR',
  };
  if (typeof status.message === 'string' && status.message) span.message = status.message;
  return span;
}

/** Adds one export request's spans to the traces they belong to. */
function collect(request: unknown, traces: Map<string, Trace>): void {
  for (const resourceSpans of (request as { resourceSpans: unknown[] }).resourceSpans) {
    const rs = (resourceSpans && typeof resourceSpans === 'object' ? resourceSpans : {}) as { resource?: { attributes?: unknown }; scopeSpans?: unknown };
    const resource = attributesOf(rs.resource?.attributes);
    for (const scope of Array.isArray(rs.scopeSpans) ? rs.scopeSpans : []) {
      const spans = (scope as { spans?: unknown } | null)?.spans;
      for (const raw of Array.isArray(spans) ? spans : []) {
        const span = spanOf(raw);
        if (!span) continue;
        let trace = traces.get(span.traceId);
        if (!trace) traces.set(span.traceId, (trace = { spans: [] }));
        trace.service ??= resource.get('service.name') as string | undefined;
        trace.hostId ??= resource.get('host.id') as string | undefined;
        trace.spans.push(span);
      }
    }
  }
}

/** A span's state as a node id of the chart: its `bootstate.state` (or name), below the machine or whole. */
function stateOf(chart: FleetChart, span: Span): string | undefined {
  const path = span.attributes.get('bootstate.state') ?? span.name;
  if (typeof path !== 'string') return undefined;
  const root = chart.graph.root;
  if (chart.graph.nodes.has(`${root}.${path}`)) return `${root}.${path}`;
  return chart.graph.nodes.has(path) ? path : undefined;
}

/** The run one trace tells, or why it is not one. */
function runOf(chart: FleetChart, source: string, trace: Trace): ReadResult {
  if (trace.service !== 'bootstate') return { skipped: { source, why: `a trace of ${trace.service ?? 'an unnamed service'}` } };
  const root = trace.spans.find((span) => span.parent === '');
  if (!root) return { unreadable: { source, why: 'the trace has no root span' } };
  if (root.name !== 'provision') return { skipped: { source, why: `a ${root.name} trace` } };
  const text = (key: string): string | undefined => (typeof root.attributes.get(key) === 'string' ? (root.attributes.get(key) as string) : undefined);
  const exit = root.attributes.get('bootstate.exit_code');
  const result = text('bootstate.result') ?? (root.error ? 'failed' : 'incomplete');
  const run: FleetRun = {
    source,
    vmId: trace.hostId ?? 'unknown',
    startedAt: new Date(root.start).toISOString(),
    outcome: result,
    ok: typeof exit === 'number' ? exit === 0 : result !== 'failed' && result !== 'incomplete' && !root.error,
    totalMs: root.end - root.start,
    states: {},
  };
  if (typeof exit === 'number') run.exitCode = exit;
  if (!run.ok) run.reason = text('bootstate.error.reason') ?? root.message ?? result;
  if (!run.ok && text('bootstate.error.cause')) run.cause = text('bootstate.error.cause');
  for (const span of trace.spans) {
    const state = stateOf(chart, span);
    const since = Math.max(0, span.start - root.start);
    if (state && inReadyState(chart, state)) run.readyMs = Math.min(run.readyMs ?? Infinity, since);
    if (state && chart.steps.has(state)) {
      const name = stateName(chart.graph.root, state);
      // A loop past its 50th entry keeps only its latest span, which tells the time of those it folded.
      const folded = span.attributes.get('bootstate.folded_ms');
      const foldedMs = typeof folded === 'number' && Number.isFinite(folded) && folded > 0 ? folded : 0;
      run.states[name] = (run.states[name] ?? 0) + (span.end - span.start) + foldedMs;
    }
    if (span.name === READY_REPORT_SPAN && !span.error) run.acceptedMs = Math.min(run.acceptedMs ?? Infinity, Math.max(0, span.end - root.start));
  }
  return { run };
}

/** Every run of an OTLP/JSON file export, the lines already parsed (the first one included). */
export async function runsFromOtlp(lines: AsyncIterable<unknown>, file: string, chart: FleetChart): Promise<ReadResult[]> {
  const traces = new Map<string, Trace>();
  let index = 0;
  for await (const raw of lines) {
    index++;
    if (!isOtlpExport(raw)) return [{ unreadable: { source: file, why: `line ${index} is not an ExportTraceServiceRequest` } }];
    collect(raw, traces);
  }
  return [...traces].map(([traceId, trace]) => runOf(chart, `${file}#${traceId}`, trace));
}
