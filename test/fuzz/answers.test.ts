/**
 * "Every answer is judged" (docs/protocol.md#imds-retries): whatever a 200 from IMDS or `reprovisiondata` carries —
 * wrong types, nulls, huge arrays, unicode, NUL bytes, duplicate keys, bytes that are not UTF-8, documents that are
 * not ovf-env.xml — it ends in a value or in a named BootstateError. Never an exception of another kind (the chart
 * would report `unhandled error`). A well-formed answer is judged at once, never retryable (the chart would ask again
 * for the same answer until its budget ran out, or for ever while a pool VM waits); only an IMDS body that is no
 * JSON at all (garbled in transit: `IMDS_PARSE`) is asked again, within the IMDS budget.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, type HttpResponse } from '../../src/azure/http.js';
import { fetchInstanceMetadataOnce, instanceMetadataFrom } from '../../src/azure/imds.js';
import { MAX_OVF_BYTES, type MediaMetadata } from '../../src/core/metadata.js';
import { fetchReprovisionDataOnce, parseReprovisionData, reprovisionTextFrom, reprovisionUrl } from '../../src/azure/reprovision.js';
import { DEFAULT_CONFIG, type ImdsConfig } from '../../src/config/defaults.js';
import type { BootstateError } from '../../src/core/errors.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';
import { parseOvfEnv } from '../../src/azure/ovf.js';
import { SecretStore } from '../../src/core/secrets.js';
import { specExample } from '../os/fixtures/ovf.js';
import { FUZZ_RUNS, hostileString, outcome, outcomeAsync, params, timeoutFor, type Outcome } from './support.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const CONFIG: ImdsConfig = { ...DEFAULT_CONFIG.imds, endpoint: 'http://127.0.0.1:9/metadata/instance?api-version=2023-11-15&extended=true' };
const ok200 = (body: Buffer | string): HttpResponse => ({ status: 200, headers: {}, body: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8') });

/**
 * The one acceptable failure of a 200: a BootstateError of one of `codes`, naming what was wrong; retryable only when
 * the IMDS body was garbled (not UTF-8, not JSON), since a well-formed answer would be the same next time.
 */
function judged(error: BootstateError, codes: string[]): void {
  expect(codes).toContain(error.code);
  const garbled = error.code === 'IMDS_PARSE';
  expect(error.retryable, `${error.code} must ${garbled ? '' : 'not '}be retryable: ${error.message}`).toBe(garbled);
  if (error.code === 'IMDS_INVALID') {
    const [key, value] = error.data[0]!;
    expect(key).toBe('key');
    expect(value).toMatch(/^(\(document\)|compute(\.[\w]+)*|extended(\.[\w]+)*)$/);
  }
}

// ---- IMDS -----------------------------------------------------------------------------------------------------

/** JSON that is not what a member should be: every type, unicode and NUL in strings, deep and wide shapes. */
const wrongValue: fc.Arbitrary<Json> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json> },
  { weight: 3, arbitrary: hostileString() },
  { weight: 3, arbitrary: fc.constantFrom<Json>(null, true, false, 0, -0, 1e308, -1, 'true', 'false', 'True', '', '\0', [], {}, [null], { keyData: null }) },
  // Huge arrays are slow to build and parse: rare, so 100k-case fuzz runs stay within their timeout.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1_000, max: 100_000 }), fc.constantFrom<Json>(null, 1, 'k', { keyData: 'k' }, { keyData: 1 }, []))
      // A copy per element: one object shared by every element would be multiplied by a later edit inside it (its
      // keyData set to another huge array is 10^10 members once serialised).
      .map(([n, item]) => Array.from({ length: n }, () => structuredClone(item))),
  },
);

/** Every path to a member the parser reads, plus the containers around them. */
const READ_PATHS = [
  ['compute'], ['compute', 'vmId'], ['compute', 'userData'], ['compute', 'osProfile'], ['compute', 'osProfile', 'adminUsername'],
  ['compute', 'osProfile', 'computerName'], ['compute', 'osProfile', 'disablePasswordAuthentication'], ['compute', 'publicKeys'],
  ['compute', 'publicKeys', '0'], ['compute', 'publicKeys', '0', 'keyData'], ['compute', 'publicKeys', '0', 'path'],
  ['extended'], ['extended', 'compute'], ['extended', 'compute', 'hasCustomData'], ['extended', 'compute', 'ppsType'],
];

/** The example document with members replaced by wrong values or removed (`undefined`). */
const mutatedDocument = fc
  .array(fc.tuple(fc.constantFrom(...READ_PATHS), fc.option(wrongValue, { nil: undefined })), { minLength: 1, maxLength: 3 })
  .map((edits) => {
    const doc = exampleImdsDocument() as Record<string, Json>;
    for (const [path, value] of edits) {
      let parent: Json | undefined = doc;
      for (const key of path.slice(0, -1)) parent = parent !== null && typeof parent === 'object' ? (parent as Record<string, Json>)[key] : undefined;
      if (parent === null || typeof parent !== 'object') continue;
      const last = path.at(-1)!;
      if (value === undefined) delete (parent as Record<string, Json>)[last];
      else (parent as Record<string, Json>)[last] = structuredClone(value);
    }
    return JSON.stringify(doc);
  });

/** osProfile written as raw text with members repeated (JSON.parse keeps the last), `__proto__` among them. */
const duplicateKeys = fc
  .array(fc.tuple(fc.constantFrom('adminUsername', 'computerName', 'disablePasswordAuthentication', '__proto__', 'constructor'), fc.oneof(wrongValue, fc.constant<Json>('azureuser'))), {
    minLength: 1,
    maxLength: 8,
  })
  .map((members) => {
    const text = JSON.stringify(exampleImdsDocument());
    const at = text.indexOf('"osProfile":{') + '"osProfile":{'.length;
    return `${text.slice(0, at)}${members.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)},`).join('')}${text.slice(at)}`;
  });

/** Bytes: arbitrary (mostly not UTF-8), a BOM, a valid document with a NUL or a lone surrogate's bytes spliced in. */
const rawBodies = fc.oneof(
  fc.uint8Array({ maxLength: 512 }).map((bytes) => Buffer.from(bytes)),
  fc.tuple(fc.nat(), fc.constantFrom(Buffer.from([0]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xff]), Buffer.from([0xef, 0xbb, 0xbf]))).map(([at, bytes]) => {
    const doc = Buffer.from(JSON.stringify(exampleImdsDocument()));
    const i = at % doc.length;
    return Buffer.concat([doc.subarray(0, i), bytes, doc.subarray(i)]);
  }),
  fc.constant(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(exampleImdsDocument()))])),
);

const imdsBodies: fc.Arbitrary<Buffer | string> = fc.oneof(
  { weight: 5, arbitrary: mutatedDocument },
  { weight: 2, arbitrary: duplicateKeys },
  { weight: 1, arbitrary: wrongValue.map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: wrongValue.map((v) => JSON.stringify({ compute: v })) },
  { weight: 1, arbitrary: hostileString() },
  { weight: 2, arbitrary: rawBodies },
);

function checkMetadata(result: Outcome<ReturnType<typeof instanceMetadataFrom>>): void {
  if (!result.ok) return judged(result.error, ['IMDS_PARSE', 'IMDS_INVALID']);
  const m = result.value;
  expect(typeof m.adminUsername).toBe('string');
  expect(typeof m.computerName).toBe('string');
  expect(typeof m.disablePasswordAuthentication).toBe('boolean');
  expect(Array.isArray(m.publicKeys) && m.publicKeys.every((k) => typeof k === 'string')).toBe(true);
  expect(m.vmId === null || typeof m.vmId === 'string').toBe(true);
  expect(typeof m.hasCustomData).toBe('boolean');
  expect(typeof m.ppsType).toBe('string');
}

describe(`an IMDS 200 with any of ${FUZZ_RUNS} hostile bodies`, () => {
  it('yields well-typed metadata, a retryable parse error for a garbled body, or a non-retryable IMDS error naming the key, never anything else', { timeout: timeoutFor(10) }, () => {
    fc.assert(
      fc.property(imdsBodies, (body) => {
        checkMetadata(outcome(() => instanceMetadataFrom(ok200(body), CONFIG, new SecretStore())));
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
      params,
    );
  });
});

// ---- ovf-env.xml and reprovisiondata -----------------------------------------------------------------------------

const NAMES = [
  'Environment', 'ProvisioningSection', 'LinuxProvisioningConfigurationSet', 'ConfigurationSetType', 'UserName', 'HostName',
  'UserPassword', 'DisableSshPasswordAuthentication', 'CustomData', 'SSH', 'PublicKeys', 'PublicKey', 'Value', 'Path',
  'PlatformSettingsSection', 'PlatformSettings', 'PreprovisionedVm', 'PreprovisionedVMType', 'preprovisionedvmtype', 'Version', 'html', 'x',
];
const PREFIXES = ['', 'wa:', 'oe:', 'ns1:', 'i:', 'bogus:'];
const NAMESPACES =
  ' xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" xmlns:wa="http://schemas.microsoft.com/windowsazure" xmlns:ns1="http://schemas.microsoft.com/windowsazure" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"';
const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const elementText = fc.oneof(
  { weight: 3, arbitrary: hostileString().map(escapeXml) },
  { weight: 1, arbitrary: hostileString() },
  { weight: 1, arbitrary: fc.constantFrom('&#0;', '&#x110000;', '&#xD800;', '&amp;', '&nope;', '<![CDATA[x]]>', 'true', 'Running', 'Savable') },
);

/** Trees of the elements an ovf-env.xml has (and some it has not), in any order, nesting (up to `depth`) and namespace. */
function element(depth: number): fc.Arbitrary<string> {
  return fc
    .tuple(
      fc.constantFrom(...PREFIXES),
      fc.constantFrom(...NAMES),
      fc.constantFrom('', '', ' i:nil="true"', ' i:nil="false"', ' a="&lt;"', ' b="&x;"'),
      elementText,
      depth === 0 ? fc.constant<string[]>([]) : fc.array(element(depth - 1), { maxLength: 3 }),
    )
    .map(([prefix, name, attr, text, children]) => `<${prefix}${name}${attr}>${text}${children.join('')}</${prefix}${name}>`);
}

const randomTree = fc.tuple(fc.boolean(), element(4)).map(([declared, body]) => {
  const root = `<Environment${NAMESPACES}>${body}</Environment>`;
  return declared ? `<?xml version="1.0" encoding="utf-8"?>\n${root}` : root;
});

/** The real documents with a field replaced, a slice cut, doubled or overwritten. */
const realDocument = fc.constantFrom(specExample(), specExample({ ppsElement: '<wa:PreprovisionedVMType>Running</wa:PreprovisionedVMType>' }), ovfDocument({ username: 'customer', hostname: 'customer-vm', keys: ['ssh-ed25519 AAAA k'] }));
const mutatedOvf = fc
  .tuple(realDocument, fc.nat(), fc.nat({ max: 300 }), fc.constantFrom('cut', 'double', 'overwrite', 'field'), hostileString())
  .map(([doc, at, length, op, text]) => {
    const i = at % doc.length;
    if (op === 'cut') return doc.slice(0, i) + doc.slice(i + length);
    if (op === 'double') return doc.slice(0, i) + doc.slice(i, i + length).repeat(2) + doc.slice(i + length);
    if (op === 'overwrite') return doc.slice(0, i) + text + doc.slice(i + text.length);
    const field = NAMES[at % NAMES.length]!;
    return doc.replace(new RegExp(`(<${field}>)[^<]*(</${field}>)`), (_m, open: string, close: string) => `${open}${length % 2 ? escapeXml(text) : text}${close}`);
  });

const notOvf = fc.oneof(
  fc.constantFrom('', ' ', '{"error":"not yet"}', '<html><body>503</body></html>', '<Environment/>', '<?xml version="1.0"?>', '<!DOCTYPE x [<!ENTITY e "e">]><x>&e;</x>'),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  hostileString(),
);

const ovfTexts = fc.oneof({ weight: 3, arbitrary: randomTree }, { weight: 3, arbitrary: mutatedOvf }, { weight: 2, arbitrary: notOvf });

function checkMedia(result: Outcome<MediaMetadata>): void {
  if (!result.ok) return judged(result.error, ['OVF_INVALID', 'PASSWORD_TOO_LONG', 'BODY_TOO_LARGE']);
  const m = result.value;
  expect(m.username === null || typeof m.username === 'string').toBe(true);
  expect(m.hostname === null || typeof m.hostname === 'string').toBe(true);
  expect(m.disablePasswordAuthentication === null || typeof m.disablePasswordAuthentication === 'boolean').toBe(true);
  expect(m.publicKeys.every((k) => typeof k === 'string')).toBe(true);
  expect(typeof m.ppsType).toBe('string');
}

describe(`ovf-env.xml parsing on ${FUZZ_RUNS} random documents`, () => {
  it('yields the media metadata or a non-retryable OVF error, never anything else', { timeout: timeoutFor(10) }, () => {
    fc.assert(
      fc.property(ovfTexts, (text) => checkMedia(outcome(() => parseOvfEnv(text, { secrets: new SecretStore() })))),
      params,
    );
  });
});

const reprovisionBodies: fc.Arbitrary<Buffer> = fc.oneof(
  ovfTexts.map((text) => Buffer.from(text, 'utf8')),
  rawBodies,
  fc.tuple(realDocument, fc.nat()).map(([doc, at]) => {
    const bytes = Buffer.from(doc);
    const i = at % bytes.length;
    return Buffer.concat([bytes.subarray(0, i), Buffer.from([0xc3]), bytes.subarray(i)]);
  }),
);

describe(`a reprovisiondata 200 with any of ${FUZZ_RUNS} random bodies`, () => {
  const url = reprovisionUrl(CONFIG.endpoint);
  it("yields the customer's media or a non-retryable error that ends the wait, never anything else", { timeout: timeoutFor(10) }, async () => {
    await fc.assert(
      fc.asyncProperty(reprovisionBodies, async (body) => {
        checkMedia(await outcomeAsync(async () => parseReprovisionData(reprovisionTextFrom(ok200(body), url), { secrets: new SecretStore() })));
      }),
      params,
    );
  });
});

// ---- the same over loopback, sizes around the limit included ------------------------------------------------------

describe('answers over loopback, sizes around the limit included', () => {
  let fabric: FakeFabric;
  let config: ImdsConfig;
  const LIMIT = 4096;
  beforeAll(async () => {
    fabric = await startFakeFabric();
    config = { ...DEFAULT_CONFIG.imds, endpoint: fabric.imdsUrl, connection_timeout_secs: 2, request_timeout_secs: 5, max_body_bytes: LIMIT };
  });
  afterAll(async () => {
    await closeAll();
    await fabric.close();
  });

  /** A body from `bodies`, or one of exactly the limit, one byte over it, or far over it. */
  const sized = (bodies: fc.Arbitrary<Buffer | string>) =>
    fc.oneof(
      { weight: 3, arbitrary: bodies.map((b) => (Buffer.isBuffer(b) ? b : Buffer.from(b, 'utf8'))) },
      { weight: 1, arbitrary: fc.constantFrom(LIMIT, LIMIT + 1, 10 * LIMIT, MAX_OVF_BYTES + 1).map((n) => Buffer.alloc(n, 0x20)) },
    );
  const runs = { numRuns: Math.min(FUZZ_RUNS, 60) };

  it('IMDS: one request, then metadata or an error judged by the class of the body (garbled: retryable)', { timeout: timeoutFor(40) }, async () => {
    await fc.assert(
      fc.asyncProperty(sized(imdsBodies), async (body) => {
        fabric.setImds({ status: 200, body, headers: { 'content-type': 'application/json' } });
        const before = fabric.requestsTo('imds').length;
        const result = await outcomeAsync(() => fetchInstanceMetadataOnce({ config }));
        expect(fabric.requestsTo('imds').length - before).toBe(1);
        if (body.length > LIMIT) {
          expect(result.ok).toBe(false);
          expect(result.ok ? null : result.error.data).toEqual([['limit', String(LIMIT)], ['path', '/metadata/instance']]);
        }
        if (!result.ok && result.error.code === 'BODY_TOO_LARGE') return judged(result.error, ['BODY_TOO_LARGE']);
        checkMetadata(result);
      }),
      runs,
    );
  });

  it('reprovisiondata: one poll, then media or a non-retryable error', { timeout: timeoutFor(40) }, async () => {
    const unlimited = { ...config, max_body_bytes: 64 * 1024 * 1024 };
    await fc.assert(
      fc.asyncProperty(sized(reprovisionBodies), fc.boolean(), async (body, small) => {
        fabric.setBehaviour('reprovision', { status: 200, body, headers: { 'content-type': 'text/xml' } });
        const limit = small ? LIMIT : MAX_OVF_BYTES;
        const result = await outcomeAsync(async () =>
          parseReprovisionData(await fetchReprovisionDataOnce({ config: small ? config : unlimited }), { secrets: new SecretStore() }),
        );
        if (body.length > limit) {
          expect(result.ok ? null : result.error.data).toEqual([['limit', String(limit)], ['path', '/metadata/reprovisiondata']]);
        }
        checkMedia(result);
      }),
      runs,
    );
  });
});
