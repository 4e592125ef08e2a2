/**
 * Where a run's trace goes, if anywhere: `[telemetry] otlp_endpoint` and the standard OpenTelemetry environment
 * variables, resolved without loading any OpenTelemetry code (a run with neither loads none). The environment wins
 * over the file, as the OpenTelemetry SDKs have it: `OTEL_SDK_DISABLED=true` turns the export off,
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is the traces URL as it stands, `OTEL_EXPORTER_OTLP_ENDPOINT` (like
 * `otlp_endpoint`) a base URL that `v1/traces` is appended to; `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` and
 * `OTEL_EXPORTER_OTLP_TIMEOUT` (ms) bound the export, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` and
 * `OTEL_EXPORTER_OTLP_PROTOCOL` choose `http/protobuf` (the default, as the specification has it) or `http/json`. Headers (`OTEL_EXPORTER_OTLP_HEADERS`,
 * `OTEL_EXPORTER_OTLP_TRACES_HEADERS`) are read by the exporter itself and never logged.
 */

/** OTLP/HTTP's two encodings, by their names in `OTEL_EXPORTER_OTLP_PROTOCOL`. */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The `[telemetry]` keys this reads. */
export interface OtlpConfig {
  otlp_endpoint: string;
  otlp_protocol: OtlpProtocol;
  otlp_timeout_secs: number;
  otlp_monitor: boolean;
}

export interface OtlpSettings {
  /** The traces URL the spans are posted to. */
  url: string;
  /** The export's own deadline, module loading and the request included. */
  timeoutMs: number;
  protocol: OtlpProtocol;
}

/** `base` with `v1/traces` appended, as the OTLP/HTTP exporters read `OTEL_EXPORTER_OTLP_ENDPOINT`. */
export function tracesUrl(base: string): string {
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/** A URL fit to name in a log line: no user name or password, no query. */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return '(an invalid URL)';
  }
}

/** A positive number of milliseconds from an environment variable, or undefined. */
function envMs(text: string | undefined): number | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const ms = Number(text);
  return Number.isFinite(ms) && ms > 0 ? Math.min(ms, 60_000) : undefined;
}

/** Where this run's trace goes and within how long, or null: no endpoint anywhere, or the SDK disabled. */
export function otlpSettings(config: OtlpConfig, env: NodeJS.ProcessEnv = process.env): OtlpSettings | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const url = traces ? traces : base ? tracesUrl(base) : config.otlp_endpoint ? tracesUrl(config.otlp_endpoint) : null;
  if (url === null || !URL.canParse(url)) return null;
  const timeoutMs = envMs(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT) ?? envMs(env.OTEL_EXPORTER_OTLP_TIMEOUT) ?? config.otlp_timeout_secs * 1000;
  const named = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  const protocol = (OTLP_PROTOCOLS as readonly string[]).includes(named ?? '') ? (named as OtlpProtocol) : config.otlp_protocol;
  return { url, timeoutMs, protocol };
}
