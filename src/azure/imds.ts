/**
 * One IMDS attempt: fetch the instance metadata document and turn it into InstanceMetadata, classifying every
 * way it can go wrong as retryable or not. The statechart decides whether and when to try again.
 *
 * The transport, the statuses IMDS documents as transient and a garbled body are retryable. A 2xx is IMDS's answer:
 * with `extended=true` IMDS fails the request rather than answer with partial data (docs/protocol.md#imds-request), so
 * a well-formed document of the wrong shape, or a body over the limit, will not be different next time, and is a
 * failure naming the key or the limit at once (as cloud-init). A body that is not UTF-8 or not JSON at all (cut short
 * with valid framing, say) is no document IMDS wrote: damage in transit, asked again within the IMDS budget, as
 * azure-init does (its test `malformed_response`).
 */
import { randomUUID } from '../core/random.js';
import * as v from 'valibot';
import type { ImdsConfig } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import type { InstanceMetadata, Placement } from '../core/metadata.js';
import { request, type HttpResponse } from './http.js';
import { decodeBase64Data } from '../os/custom-data.js';
import type { SecretStore } from '../core/secrets.js';
import { AGENT } from '../core/version.js';

/** Statuses IMDS uses while it is still starting up or throttling (azure-init's RETRY_CODES). */
export const IMDS_RETRYABLE_STATUSES: ReadonlySet<number> = new Set([400, 404, 410, 429, 500, 503]);

const PasswordAuth = v.pipe(
  v.union([v.boolean(), v.picklist(['true', 'false'])], 'expected "true", "false" or a boolean'),
  v.transform((value) => value === true || value === 'true'),
);

/** An object of `entries`; unlike `v.object` alone, an array is not one (`[1, 2]` names its own key, not a member). */
const record = <T extends v.ObjectEntries>(entries: T) =>
  v.pipe(
    v.custom<Record<string, unknown>>((x) => typeof x === 'object' && x !== null && !Array.isArray(x), 'expected an object'),
    v.object(entries, 'expected an object'),
  );

/** The part of the document provisioning reads; every other member is ignored. */
const InstanceDocument = record({
  compute: record({
    vmId: v.optional(v.string('expected a string')),
    userData: v.optional(v.string('expected a string')),
    osProfile: record({
      adminUsername: v.string('expected a string'),
      computerName: v.string('expected a string'),
      disablePasswordAuthentication: PasswordAuth,
    }),
    publicKeys: v.array(record({ keyData: v.string('expected a string'), path: v.optional(v.string('expected a string')) }), 'expected an array'),
  }),
  extended: v.optional(
    record({
      compute: v.optional(
        record({
          hasCustomData: v.optional(v.boolean('expected a boolean')),
          ppsType: v.optional(v.string('expected a string')),
        }),
      ),
    }),
  ),
});

/** A short printable string, or undefined. */
function word(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' && value.length <= 256 && /^[\x21-\x7e]+$/.test(value) ? value : undefined;
}

/** Region, size and image from the document, read without failing: provisioning never needs them. */
export function placementOf(json: unknown): Placement | undefined {
  const compute = (json as { compute?: Record<string, unknown> } | null)?.compute;
  if (!compute || typeof compute !== 'object') return undefined;
  const storage = compute.storageProfile as { imageReference?: Record<string, unknown> } | undefined;
  const image = storage?.imageReference && typeof storage.imageReference === 'object' ? storage.imageReference : {};
  const [publisher, offer, sku] = [word(image.publisher ?? compute.publisher), word(image.offer ?? compute.offer), word(image.sku ?? compute.sku)];
  const placement: Placement = {
    location: word(compute.location),
    vmSize: word(compute.vmSize),
    imageName: publisher && offer && sku ? `${publisher}:${offer}:${sku}` : undefined,
    imageVersion: word(compute.version) ?? word(image.exactVersion) ?? word(image.version),
    imageId: word(image.id),
  };
  const present = Object.entries(placement).filter(([, value]) => value !== undefined);
  return present.length > 0 ? (Object.fromEntries(present) as Placement) : undefined;
}

/** The body as JSON; IMDS_PARSE (retryable: garbled in transit) when it is not. */
function parseImdsJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the body around the fault, and the body may carry custom data: never echo it.
    const problem = `body of ${Buffer.byteLength(text, 'utf8')} bytes is not valid JSON`;
    throw new BootstateError('IMDS_PARSE', `IMDS ${problem}`, { data: [['error', problem]], retryable: true });
  }
}

/**
 * Parses and validates an IMDS response body.
 *
 * @example
 *   parseInstanceMetadata('{"compute":{"osProfile":{...},"publicKeys":[]}}').adminUsername
 * @throws BootstateError IMDS_PARSE (retryable: garbled) for text that is not JSON, IMDS_INVALID (with `key=<path>`,
 *   not retryable) for the wrong shape.
 */
export function parseInstanceMetadata(text: string, secrets?: SecretStore): InstanceMetadata {
  const json = parseImdsJson(text);
  const result = v.safeParse(InstanceDocument, json);
  if (!result.success) {
    const issue = result.issues[0];
    const key = v.getDotPath(issue) ?? '(document)';
    // Only the expected and received *types*: the received value itself is metadata and stays out of logs.
    const received = issue.input === null ? 'null' : Array.isArray(issue.input) ? 'array' : typeof issue.input;
    // JSON has no undefined: an issue about one is a required member that is absent.
    const problem = issue.input === undefined ? 'required member is missing' : `${issue.message}, received ${received}`;
    throw new BootstateError('IMDS_INVALID', `invalid IMDS metadata for key=${key}: ${problem}`, {
      data: [
        ['key', key],
        ['error', problem],
      ],
    });
  }
  const { compute, extended } = result.output;
  let userData: InstanceMetadata['userData'];
  if (compute.userData && compute.userData.trim() !== '') {
    const bytes = decodeBase64Data(compute.userData);
    userData = bytes ? 'present' : 'invalid';
    if (bytes) secrets?.set('userData', bytes);
  }
  const placement = placementOf(json);
  return {
    ...(userData ? { userData } : {}),
    ...(placement ? { placement } : {}),
    vmId: compute.vmId ?? null,
    adminUsername: compute.osProfile.adminUsername,
    computerName: compute.osProfile.computerName,
    disablePasswordAuthentication: compute.osProfile.disablePasswordAuthentication,
    publicKeys: compute.publicKeys.map((key) => key.keyData),
    hasCustomData: extended?.compute?.hasCustomData ?? false,
    ppsType: extended?.compute?.ppsType ?? 'None',
  };
}

export interface FetchInstanceMetadataOptions {
  config: ImdsConfig;
  signal?: AbortSignal;
  /** Receives the decoded `compute.userData`. */
  secrets?: SecretStore;
  /** Overrides the fresh UUIDv4 sent as `x-ms-client-request-id` (tests, correlation). */
  requestId?: string;
  /** Called as the request is written to its socket. */
  onSent?: () => void;
}

/**
 * Makes exactly one IMDS request and returns the validated metadata.
 *
 * @throws BootstateError HTTP_TRANSPORT (retryable, a body shorter than its Content-Length included), HTTP_STATUS
 *   (retryable for 400/404/410/429/500/503, otherwise not, redirects included), IMDS_PARSE (retryable: a garbled
 *   body, not UTF-8 or not JSON); not retryable: BODY_TOO_LARGE (a 2xx over `max_body_bytes`) and IMDS_INVALID (the
 *   wrong shape, `key=<path>`).
 */
export async function fetchInstanceMetadataOnce(options: FetchInstanceMetadataOptions): Promise<InstanceMetadata> {
  return instanceMetadataFrom(await requestInstanceMetadata(options), options.config, options.secrets);
}

/** The HTTP half of `fetchInstanceMetadataOnce`: one GET of the instance document, its answer unread. */
export function requestInstanceMetadata(options: Omit<FetchInstanceMetadataOptions, 'secrets'>): Promise<HttpResponse> {
  const { config } = options;
  return request(config.endpoint, {
    method: 'GET',
    headers: {
      Metadata: 'true',
      'User-Agent': AGENT,
      'x-ms-client-request-id': options.requestId ?? randomUUID(),
    },
    connectTimeoutMs: config.connection_timeout_secs * 1000,
    requestTimeoutMs: config.request_timeout_secs * 1000,
    maxBodyBytes: config.max_body_bytes,
    signal: options.signal,
    onSent: options.onSent,
  });
}

/** The other half: the metadata in IMDS's answer, or the error that answer is (same errors as above). */
export function instanceMetadataFrom(res: HttpResponse, config: ImdsConfig, secrets?: SecretStore): InstanceMetadata {
  return parseInstanceMetadata(imdsBodyText(res, config), secrets);
}

/**
 * IMDS's answer as the JSON value it is, for readers of other sections than provisioning's (the network step):
 * the same HTTP_STATUS and IMDS_PARSE errors as `instanceMetadataFrom`, and no check of the document's shape.
 */
export function imdsDocumentFrom(res: HttpResponse, config: ImdsConfig): unknown {
  return parseImdsJson(imdsBodyText(res, config));
}

/** The body of a 2xx answer as text; HTTP_STATUS for any other status, IMDS_PARSE for a body that is not UTF-8. */
function imdsBodyText(res: HttpResponse, config: ImdsConfig): string {
  if (res.status < 200 || res.status > 299) {
    const retryable = IMDS_RETRYABLE_STATUSES.has(res.status);
    throw new BootstateError('HTTP_STATUS', `IMDS answered HTTP ${res.status}`, {
      data: [
        ['endpoint', config.endpoint],
        ['status', String(res.status)],
      ],
      retryable,
    });
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(res.body);
  } catch {
    throw new BootstateError('IMDS_PARSE', 'IMDS body is not valid UTF-8', {
      data: [['error', 'body is not valid UTF-8']],
      retryable: true,
    });
  }
}
