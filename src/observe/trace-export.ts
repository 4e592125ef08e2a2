/**
 * A finished run's trace sent to the operator's collector, within its own deadline: the OpenTelemetry SDK is loaded
 * (otlp-export.ts) only here, only when an endpoint is configured, and the whole of it — loading the SDK, the
 * request — is bounded by `timeoutMs`. A collector that is down, refuses or stalls costs one warning, never the run.
 * Callers start it after READY=1 and the Ready report, so neither waits for it.
 */
import { escapeValue } from '../core/errors.js';
import type { Placement } from '../core/metadata.js';
import { VERSION } from '../core/version.js';
import { shownUrl, type OtlpSettings } from './otlp-settings.js';
import type { Attributes, SpanRecord } from './run-trace.js';

/** How an export ended. */
export type ExportOutcome = { sent: number } | { failed: string };

/** The resource attributes of a run: the agent, the VM id, its region, size and image (from IMDS), by semantic convention. */
export function runResource(vmId: string | null | undefined, placement: Placement | undefined): Attributes {
  const out: Attributes = {
    'service.name': 'bootstate',
    'service.version': VERSION,
    'cloud.provider': 'azure',
    'cloud.platform': 'azure.vm',
    'os.type': 'linux',
  };
  if (vmId) out['host.id'] = vmId;
  if (placement?.location) out['cloud.region'] = placement.location;
  if (placement?.vmSize) out['host.type'] = placement.vmSize;
  if (placement?.imageName) out['host.image.name'] = placement.imageName;
  if (placement?.imageVersion) out['host.image.version'] = placement.imageVersion;
  if (placement?.imageId) out['host.image.id'] = placement.imageId;
  return out;
}

/** Sends the spans; resolves within `settings.timeoutMs` whatever the collector does, and never rejects. */
export async function exportTrace(spans: readonly SpanRecord[], resource: Attributes, settings: OtlpSettings): Promise<ExportOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<ExportOutcome>((resolve) => {
    timer = setTimeout(() => resolve({ failed: `no answer from ${shownUrl(settings.url)} within ${settings.timeoutMs} ms` }), settings.timeoutMs);
    timer.unref();
  });
  const send = (async (): Promise<ExportOutcome> => {
    try {
      const { sendSpans } = await import('./otlp-export.js');
      const problem = await sendSpans(spans, resource, settings, VERSION);
      return problem === null ? { sent: spans.length } : { failed: `${shownUrl(settings.url)}: ${escapeValue(problem, 200)}` };
    } catch (error) {
      return { failed: `${shownUrl(settings.url)}: ${escapeValue(String((error as Error)?.message ?? error), 200)}` };
    }
  })();
  try {
    return await Promise.race([send, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
