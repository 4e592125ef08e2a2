/**
 * The wireserver's goal state and its Certificates document (docs/certificates.md): one GET per call, classified as
 * accepted, worth retrying or refused; the statechart owns retries and the deadline. Only the goal state's
 * Certificates URL is used, and only its path and query: the request goes to the configured wireserver, never to a
 * host a document names.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import type { WireserverConfig } from '../config/defaults.js';
import { BootstateError } from '../core/errors.js';
import { AGENT } from '../core/version.js';
import { request } from './http.js';

/** The protocol version of the goal state and Certificates requests (what cloud-init and WALinuxAgent send). */
export const GOAL_STATE_VERSION = '2012-11-30';
/** Statuses after which the same request may succeed: 410 is a goal state that changed while it was asked for. */
export const GOAL_STATE_RETRYABLE_STATUSES: ReadonlySet<number> = new Set([410, 429, 500, 502, 503]);
const MAX_GOAL_STATE_BYTES = 256 * 1024;
const MAX_CERTIFICATES_BYTES = 8 * 1024 * 1024;

export interface GoalState {
  incarnation: string;
  /** Path and query of the Certificates document, or null when the VM has no certificates. */
  certificatesPath: string | null;
}

export interface GoalStateRequestOptions {
  config: WireserverConfig;
  signal?: AbortSignal;
}

/** The wireserver's origin: that of `health_endpoint`, so a test's loopback wireserver serves both. */
export function wireserverOrigin(config: Pick<WireserverConfig, 'health_endpoint'>): string {
  return new URL(config.health_endpoint).origin;
}

/** Headers of every goal-state request; the wireserver knows agents by this name, and cloud-init sends it too. */
const baseHeaders = () => ({ 'User-Agent': AGENT, 'x-ms-agent-name': 'WALinuxAgent', 'x-ms-version': GOAL_STATE_VERSION });

/**
 * `GET /machine/?comp=goalstate`.
 *
 * @throws BootstateError HTTP_TRANSPORT (retryable), HTTP_STATUS (retryable for 410/429/500/502/503),
 *   CERTIFICATES_FAILED (a 2xx that is not a goal state).
 */
export async function fetchGoalStateOnce({ config, signal }: GoalStateRequestOptions): Promise<GoalState> {
  const url = `${wireserverOrigin(config)}/machine/?comp=goalstate`;
  return parseGoalState(await get(url, baseHeaders(), MAX_GOAL_STATE_BYTES, config, signal, 'goal state'));
}

/**
 * `GET` the Certificates document with the transport certificate; returns the enveloped blob (DER).
 *
 * @throws as fetchGoalStateOnce; CERTIFICATES_FAILED for a document without usable `Data`.
 */
export async function fetchCertificatesOnce(
  { config, signal }: GoalStateRequestOptions,
  certificatesPath: string,
  transportCertificateBase64: string,
): Promise<Buffer> {
  const headers = { ...baseHeaders(), 'x-ms-cipher-name': 'DES_EDE3_CBC', 'x-ms-guest-agent-public-x509-cert': transportCertificateBase64 };
  const text = await get(`${wireserverOrigin(config)}${certificatesPath}`, headers, MAX_CERTIFICATES_BYTES, config, signal, 'Certificates');
  return parseCertificatesDocument(text);
}

async function get(url: string, headers: Record<string, string>, maxBodyBytes: number, config: WireserverConfig, signal: AbortSignal | undefined, what: string): Promise<string> {
  const res = await request(url, {
    method: 'GET',
    headers,
    connectTimeoutMs: config.connection_timeout_secs * 1000,
    requestTimeoutMs: config.read_timeout_secs * 1000,
    maxBodyBytes,
    signal,
  });
  if (res.status < 200 || res.status > 299) {
    throw new BootstateError('HTTP_STATUS', `wireserver answered HTTP ${res.status} to the ${what} request`, {
      data: [['endpoint', url], ['status', String(res.status)]],
      retryable: GOAL_STATE_RETRYABLE_STATUSES.has(res.status),
    });
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(res.body);
  } catch {
    throw invalid(`the ${what} document is not UTF-8`);
  }
}

/** The parts of a goal state document used here. */
export function parseGoalState(xml: string): GoalState {
  const root = element(parseXml(xml, 'goal state'), 'GoalState');
  if (!root) throw invalid('the goal state document has no GoalState element');
  const incarnation = text(root.Incarnation);
  if (!incarnation) throw invalid('the goal state has no Incarnation');
  const container = element(root, 'Container');
  const list = container && element(container, 'RoleInstanceList');
  const instances = list?.RoleInstance;
  // Several role instances: the first is this VM's, as WALinuxAgent and cloud-init take it.
  const instance = Array.isArray(instances) ? (instances[0] as unknown) : instances;
  const configuration = instance && typeof instance === 'object' ? element(instance as Record<string, unknown>, 'Configuration') : null;
  const url = text(configuration?.Certificates);
  if (!url) return { incarnation, certificatesPath: null };
  let parsed: URL;
  try {
    parsed = new URL(url, 'http://wireserver');
  } catch {
    throw invalid('the goal state names a Certificates URL that is not a URL');
  }
  return { incarnation, certificatesPath: `${parsed.pathname}${parsed.search}` };
}

/** The enveloped blob of a `CertificateFile` document. */
export function parseCertificatesDocument(xml: string): Buffer {
  const root = element(parseXml(xml, 'Certificates'), 'CertificateFile');
  if (!root) throw invalid('the Certificates document has no CertificateFile element');
  const format = text(root.Format);
  if (format && format !== 'Pkcs7BlobWithPfxContents') throw invalid(`the Certificates format is ${format}, not Pkcs7BlobWithPfxContents`);
  const data = text(root.Data).replace(/\s+/g, '');
  if (!data) throw invalid('the Certificates document has no Data');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(data)) throw invalid('the Certificates Data is not base64');
  return Buffer.from(data, 'base64');
}

function parseXml(xml: string, what: string): Record<string, unknown> {
  const body = xml.replace(/^\uFEFF/, '');
  if (/<!DOCTYPE|<!ENTITY/i.test(body)) throw invalid(`the ${what} document has a DOCTYPE or ENTITY declaration`);
  const valid = XMLValidator.validate(body);
  if (valid !== true) throw invalid(`the ${what} document is not well-formed XML: ${valid.err.msg}`);
  try {
    return new XMLParser({ processEntities: false, htmlEntities: false, parseTagValue: false, ignoreAttributes: true, removeNSPrefix: true }).parse(body) as Record<string, unknown>;
  } catch (error) {
    // The parser's own exceptions (an unclosed processing instruction, say) mean the document is malformed.
    throw invalid(`the ${what} document is not well-formed XML: ${(error as Error).message}`);
  }
}

/** A child element as an object; an empty one (`<X></X>`, which the parser gives as '') has no children. */
function element(parent: Record<string, unknown>, name: string): Record<string, unknown> | null {
  const value = parent[name];
  if (value === '') return {};
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function text(value: unknown): string {
  if (typeof value === 'string') return value.replace(/&amp;/g, '&').trim();
  if (typeof value === 'number') return String(value);
  return '';
}

function invalid(problem: string): BootstateError {
  return new BootstateError('CERTIFICATES_FAILED', problem, { data: [['problem', problem]] });
}
