/**
 * A real OTLP/HTTP trace receiver on loopback for the tests and the bench: `POST /v1/traces`, protobuf decoded with
 * the message definitions generated from opentelemetry-proto (the root `@opentelemetry/otlp-transformer` 0.57 ships,
 * installed as `otlp-proto-root`), JSON parsed as the OTLP JSON mapping has it (hex ids, int64 as strings or numbers).
 * It can also refuse (HTTP 503) or stall (accept and never answer) to play a collector in trouble.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
/** The generated protobuf root (CommonJS, protobufjs's static module). */
interface ProtoType {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
}
const root = require('otlp-proto-root/build/src/generated/root.js') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtoType } } } } };
};
const ExportTraceServiceRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

export type Value = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** Nanoseconds since the epoch. */
  start: bigint;
  end: bigint;
  attributes: Record<string, Value>;
  status: { code: number; message: string };
  scope: string;
}

export interface ReceivedTrace {
  contentType: string;
  resource: Record<string, Value>;
  spans: ReceivedSpan[];
}

type AnyValue = { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number };
type KeyValue = { key: string; value?: AnyValue };
type Request = {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{ scope?: { name?: string }; spans?: Array<Record<string, unknown>> }>;
  }>;
};

function attributes(list: KeyValue[] | undefined): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const { key, value } of list ?? []) {
    if (value?.stringValue !== undefined) out[key] = value.stringValue;
    else if (value?.boolValue !== undefined) out[key] = value.boolValue;
    else if (value?.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value?.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

/** A request in the OTLP JSON shape (protobuf's decoded into it: ids as hex, int64 as strings). */
function traceOf(request: Request, contentType: string): ReceivedTrace {
  const resource: Record<string, Value> = {};
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    Object.assign(resource, attributes(resourceSpans.resource?.attributes));
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        const status = (span.status ?? {}) as { code?: number; message?: string };
        spans.push({
          traceId: (span.traceId as string | undefined) ?? '',
          spanId: (span.spanId as string | undefined) ?? '',
          parentSpanId: (span.parentSpanId as string | undefined) ?? '',
          name: String(span.name),
          start: BigInt(span.startTimeUnixNano as string),
          end: BigInt(span.endTimeUnixNano as string),
          attributes: attributes(span.attributes as KeyValue[]),
          status: { code: status.code ?? 0, message: status.message ?? '' },
          scope: scopeSpans.scope?.name ?? '',
        });
      }
    }
  }
  return { contentType, resource, spans };
}

/** Bytes fields as hex, as OTLP's JSON mapping writes ids. */
const hex = (value: unknown): unknown => (value instanceof Uint8Array ? Buffer.from(value).toString('hex') : value);

/** Decodes one export request by its content type. */
export function decodeExport(body: Buffer, contentType: string): ReceivedTrace {
  if (contentType.startsWith('application/x-protobuf')) {
    const message = ExportTraceServiceRequest.decode(body);
    const object = ExportTraceServiceRequest.toObject(message, { longs: String, enums: Number, defaults: false }) as Request;
    for (const resourceSpans of object.resourceSpans ?? []) {
      for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
        for (const span of scopeSpans.spans ?? []) for (const key of ['traceId', 'spanId', 'parentSpanId']) span[key] = hex(span[key]);
      }
    }
    return traceOf(object, contentType);
  }
  if (contentType.startsWith('application/json')) return traceOf(JSON.parse(body.toString('utf8')) as Request, contentType);
  throw new Error(`unexpected content type ${contentType}`);
}

export interface OtlpReceiver {
  /** The base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`). */
  url: string;
  traces: ReceivedTrace[];
  /** Request headers seen, in order. */
  headers: http.IncomingHttpHeaders[];
  /** Every request body as received (searched for secrets). */
  bodies: Buffer[];
  mode: 'ok' | 'refuse' | 'stall';
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1. */
export async function startOtlpReceiver(mode: OtlpReceiver['mode'] = 'ok'): Promise<OtlpReceiver> {
  const receiver = { traces: [], headers: [], bodies: [], mode } as unknown as OtlpReceiver;
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      receiver.headers.push(request.headers);
      receiver.bodies.push(Buffer.concat(chunks));
      if (receiver.mode === 'stall') return;
      if (receiver.mode === 'refuse' || request.url !== '/v1/traces') {
        response.writeHead(receiver.mode === 'refuse' ? 503 : 404).end();
        return;
      }
      const contentType = String(request.headers['content-type'] ?? '');
      receiver.traces.push(decodeExport(Buffer.concat(chunks), contentType));
      // An empty ExportTraceServiceResponse: no bytes in protobuf, `{}` in JSON.
      response.writeHead(200, { 'content-type': contentType }).end(contentType.startsWith('application/json') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return receiver;
}

/** A base URL on loopback where nothing listens (a collector that is down). */
export async function downUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
