/**
 * Parses Azure's ovf-env.xml (docs/protocol.md#ovf-schema) namespace-aware: elements are matched by namespace URI and local name,
 * so `wa:`, `ns1:` and default-namespace producers all work. A DOCTYPE is rejected outright and entities are
 * never expanded (only the five predefined ones and character references are decoded), so no entity attack
 * (billion laughs, external entities) can reach the parser. The password and the decoded CustomData go into the SecretStore only.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { MAX_OVF_BYTES, normalizeThumbprint, type CertificateReference, type MediaMetadata } from '../core/metadata.js';
import { BootstateError, escapeValue } from '../core/errors.js';
import type { SecretStore } from '../core/secrets.js';
import { decodeBase64Data } from '../os/custom-data.js';
import { validatePassword } from '../os/validate.js';

export const OVF_NS = 'http://schemas.dmtf.org/ovf/environment/1';
export const WA_NS = 'http://schemas.microsoft.com/windowsazure';

interface Element {
  ns: string;
  local: string;
  attrs: Map<string, string>;
  children: Element[];
  text: string;
}

export interface ParseOvfOptions {
  /** Receives the admin password when the document carries a non-empty one. */
  secrets?: SecretStore;
  /** Device the document came from, recorded in the result. */
  device?: string;
}

/** Parses ovf-env.xml text into MediaMetadata (password → `secrets`), or throws OVF_INVALID / PASSWORD_TOO_LONG. */
export function parseOvfEnv(xml: string, options: ParseOvfOptions = {}): MediaMetadata {
  if (Buffer.byteLength(xml) > MAX_OVF_BYTES) throw invalid(`document is larger than ${MAX_OVF_BYTES} bytes`);
  const text = xml.replace(/^\uFEFF/, '');
  if (/<!DOCTYPE/i.test(text) || /<!ENTITY/i.test(text)) throw invalid('document has a DOCTYPE or ENTITY declaration');
  let roots: Element[];
  try {
    roots = parseElements(text);
  } catch (error) {
    if (error instanceof BootstateError) throw error;
    // The parser's own exceptions (e.g. an unclosed processing instruction) mean the document is malformed.
    throw invalid(`not well-formed XML: ${(error as Error).message}`);
  }
  return fromEnvironment(roots.find((e) => e.local === 'Environment'), options);
}

/** Validates well-formedness and builds the element tree (entities untouched). */
function parseElements(text: string): Element[] {
  const valid = XMLValidator.validate(text);
  if (valid !== true) throw invalid(`not well-formed XML: ${valid.err.msg} (line ${valid.err.line})`);
  const parser = new XMLParser({
    preserveOrder: true,
    ignoreAttributes: false,
    attributeNamePrefix: '',
    processEntities: false,
    htmlEntities: false,
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: false,
    cdataPropName: '#cdata',
  });
  return toElements(parser.parse(text) as RawNode[], new Map([['xml', 'http://www.w3.org/XML/1998/namespace']]));
}

/** Continuation of parseOvfEnv once the document is a tree of namespaced elements. */
function fromEnvironment(env: Element | undefined, options: ParseOvfOptions): MediaMetadata {
  if (!env || !inNs(env, OVF_NS)) throw invalid('root element is not an OVF Environment');

  const provisioning = single(env, 'ProvisioningSection', WA_NS);
  if (!provisioning) throw invalid('no ProvisioningSection: not an Azure ovf-env.xml');
  const linux = single(provisioning, 'LinuxProvisioningConfigurationSet', WA_NS);
  if (!linux) throw invalid('no LinuxProvisioningConfigurationSet');

  const field = (name: string) => single(linux, name, WA_NS);
  const trimmed = (name: string) => field(name)?.text.trim() || null;

  const password = field('UserPassword')?.text ?? '';
  if (password.length > 0) {
    validatePassword(password);
    options.secrets?.setPassword(password);
  }
  const customData = field('CustomData')?.text ?? '';
  let customDataEncoding: MediaMetadata['customDataEncoding'];
  if (customData.replace(/\s+/g, '').length > 0) {
    // Azure sends base64, but text that is not base64 is still the owner's data: kept as received, never a reason
    // to set the whole document (and with it the password and keys) aside.
    const bytes = decodeBase64Data(customData);
    customDataEncoding = bytes ? 'base64' : 'verbatim';
    options.secrets?.set('customData', bytes ?? Buffer.from(customData.trim(), 'utf8'));
  }
  const disable = field('DisableSshPasswordAuthentication');
  const keys = single(single(linux, 'SSH', WA_NS) ?? emptyElement(), 'PublicKeys', WA_NS);
  const entries = (keys?.children ?? []).filter((e) => e.local === 'PublicKey' && inNs(e, WA_NS));
  const publicKeys = entries.map((key) => single(key, 'Value', WA_NS)?.text.trim() ?? '').filter((v) => v.length > 0);
  // A key without a Value names a certificate of the goal state by its thumbprint: kept, never dropped in silence.
  const keyFingerprints = entries
    .filter((key) => (single(key, 'Value', WA_NS)?.text.trim() ?? '') === '')
    .map(certificateReference)
    .filter((ref) => ref.fingerprint !== '');
  const pairs = single(single(linux, 'SSH', WA_NS) ?? emptyElement(), 'KeyPairs', WA_NS);
  const keyPairs = (pairs?.children ?? []).filter((e) => e.local === 'KeyPair' && inNs(e, WA_NS)).map(certificateReference).filter((ref) => ref.fingerprint !== '');

  return {
    username: trimmed('UserName'),
    hostname: trimmed('HostName'),
    disablePasswordAuthentication: disable ? disable.text.trim().toLowerCase() === 'true' : null,
    publicKeys,
    ...(keyFingerprints.length > 0 ? { keyFingerprints } : {}),
    ...(keyPairs.length > 0 ? { keyPairs } : {}),
    passwordProvided: password.length > 0,
    customDataPresent: (field('CustomData')?.text.replace(/\s+/g, '') ?? '').length > 0,
    ...(customDataEncoding === 'verbatim' ? { customDataEncoding } : {}),
    ppsType: ppsType(env),
    ...(provisionGuestProxyAgent(env) ? { provisionGuestProxyAgent: true } : {}),
    device: options.device ?? '',
  };
}

/**
 * A `PublicKey` without `Value`, or a `KeyPair`: the certificate's SHA-1 thumbprint as Azure writes it (colons,
 * spaces and case forgiven), and the path the key belongs at. One that is not a thumbprint is kept as written: it
 * matches no certificate and is named in a warning then, rather than costing the document its password and keys.
 */
function certificateReference(element: Element): CertificateReference {
  const raw = single(element, 'Fingerprint', WA_NS)?.text.trim() ?? '';
  return { fingerprint: normalizeThumbprint(raw) ?? raw, path: single(element, 'Path', WA_NS)?.text.trim() ?? '' };
}

/** `ProvisionGuestProxyAgent`: the platform asks that Azure's Guest Proxy Agent be running before IMDS is used. */
function provisionGuestProxyAgent(env: Element): boolean {
  const settings = single(single(env, 'PlatformSettingsSection', WA_NS) ?? emptyElement(), 'PlatformSettings', WA_NS);
  return settings ? single(settings, 'ProvisionGuestProxyAgent', WA_NS)?.text.trim().toLowerCase() === 'true' : false;
}

/** The preprovisioning type: either spelling of the element, case-insensitively; `Running` for the legacy flag. */
function ppsType(env: Element): string {
  const settings = single(single(env, 'PlatformSettingsSection', WA_NS) ?? emptyElement(), 'PlatformSettings', WA_NS);
  if (!settings) return 'None';
  const type = settings.children.find((e) => e.local.toLowerCase() === 'preprovisionedvmtype' && inNs(e, WA_NS));
  const value = type?.text.trim();
  if (value && type?.attrs.get(`{http://www.w3.org/2001/XMLSchema-instance}nil`) !== 'true') return value;
  const legacy = single(settings, 'PreprovisionedVm', WA_NS)?.text.trim().toLowerCase();
  return legacy === 'true' ? 'Running' : 'None';
}

type RawNode = Record<string, unknown> & { ':@'?: Record<string, string> };

/** Turns fast-xml-parser's ordered output into elements with resolved namespaces. */
function toElements(nodes: RawNode[], scope: Map<string, string>): Element[] {
  const out: Element[] = [];
  for (const node of nodes) {
    const name = Object.keys(node).find((k) => k !== ':@');
    if (!name || name.startsWith('?') || name === '#text' || name === '#cdata') continue;
    const rawAttrs = node[':@'] ?? {};
    const inner = new Map(scope);
    for (const [key, value] of Object.entries(rawAttrs)) {
      if (key === 'xmlns') inner.set('', value);
      else if (key.startsWith('xmlns:')) inner.set(key.slice(6), value);
    }
    const [prefix, local] = name.includes(':') ? name.split(':', 2) as [string, string] : ['', name];
    const ns = inner.get(prefix);
    if (ns === undefined && prefix !== '') throw invalid(`unbound namespace prefix ${escapeValue(prefix)}`);
    const attrs = new Map<string, string>();
    for (const [key, value] of Object.entries(rawAttrs)) {
      if (key === 'xmlns' || key.startsWith('xmlns:')) continue;
      const [ap, al] = key.includes(':') ? key.split(':', 2) as [string, string] : ['', key];
      attrs.set(ap ? `{${inner.get(ap) ?? ap}}${al}` : al, decode(value));
    }
    const children = node[name] as RawNode[];
    let text = '';
    for (const child of children) {
      if (typeof child['#text'] === 'string') text += decode(child['#text']);
      else if (Array.isArray(child['#cdata'])) text += (child['#cdata'] as RawNode[]).map((c) => (typeof c['#text'] === 'string' ? c['#text'] : '')).join('');
    }
    out.push({ ns: ns ?? '', local, attrs, children: toElements(children, inner), text });
  }
  return out;
}

/** Decodes the predefined entities and character references; anything else named `&x;` is an error. */
function decode(raw: string): string {
  return raw.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[A-Za-z]+);/g, (_, ref: string) => {
    if (ref.startsWith('#')) {
      const code = ref[1] === 'x' ? Number.parseInt(ref.slice(2), 16) : Number(ref.slice(1));
      if (!Number.isFinite(code) || code > 0x10ffff || code === 0) throw invalid('invalid character reference');
      return String.fromCodePoint(code);
    }
    const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
    if (!(ref in named)) throw invalid(`undefined entity &${escapeValue(ref)};`);
    return named[ref]!;
  });
}

/** Elements of the Azure namespace are also accepted without a namespace, as some producers write them. */
function inNs(element: Element, ns: string): boolean {
  return element.ns === ns || element.ns === '';
}

/** The only child `local` in `ns`, null when absent; more than one is invalid metadata. */
function single(parent: Element, local: string, ns: string): Element | null {
  const found = parent.children.filter((e) => e.local === local && inNs(e, ns));
  if (found.length > 1) throw invalid(`more than one ${local}`);
  return found[0] ?? null;
}

function emptyElement(): Element {
  return { ns: '', local: '', attrs: new Map(), children: [], text: '' };
}

function invalid(problem: string): BootstateError {
  return new BootstateError('OVF_INVALID', `ovf-env.xml: ${problem}`, { data: [['problem', problem]] });
}
