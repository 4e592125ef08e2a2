/**
 * Sends recorded spans (run-trace.ts) as one trace over OTLP/HTTP with the official OpenTelemetry SDK. Loaded only by
 * trace-export.ts, and only when an endpoint is configured: the build keeps it and the SDK out of the scripts a
 * default run reads (scripts/build/bundle.mjs).
 */
import { ROOT_CONTEXT, SpanStatusCode, trace, type Attributes as OtelAttributes, type Span } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Attributes, SpanRecord } from './run-trace.js';
import type { OtlpSettings } from './otlp-settings.js';

/** Every span as it ends, for one export of them all. */
class Collected implements SpanProcessor {
  readonly spans: ReadableSpan[] = [];
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    this.spans.push(span);
  }
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

/** The records as SDK spans: each started under its parent with its own times, ended in order. */
function replay(provider: BasicTracerProvider, records: readonly SpanRecord[], version: string): void {
  const tracer = provider.getTracer('bootstate', version);
  const made = new Map<number, Span>();
  for (const record of records) {
    const parent = record.parent === null ? undefined : made.get(record.parent);
    const context = parent ? trace.setSpan(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
    made.set(record.id, tracer.startSpan(record.name, { startTime: record.start, attributes: record.attributes as OtelAttributes, root: !parent }, context));
  }
  // Children end before their parents, as they did.
  for (const record of [...records].reverse()) {
    const span = made.get(record.id)!;
    if (record.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: record.error });
    span.end(record.end ?? record.start);
  }
}

/** Posts the spans as one request; resolves with null once the collector took them, or with why it did not. */
export async function sendSpans(records: readonly SpanRecord[], resource: Attributes, settings: OtlpSettings, version: string): Promise<string | null> {
  const collected = new Collected();
  // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME still have the last word, as in every OpenTelemetry SDK.
  const fromEnv = detectResources({ detectors: [envDetector] });
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes(resource)).merge(fromEnv),
    spanProcessors: [collected],
  });
  replay(provider, records, version);
  const Exporter = settings.protocol === 'http/json' ? JsonExporter : ProtobufExporter;
  const exporter = new Exporter({ url: settings.url, timeoutMillis: settings.timeoutMs, keepAlive: false });
  try {
    return await new Promise<string | null>((resolve) => {
      exporter.export(collected.spans, (result) => {
        resolve(result.code === ExportResultCode.SUCCESS ? null : (result.error?.message ?? 'export failed'));
      });
    });
  } finally {
    await exporter.shutdown().catch(() => undefined);
  }
}
