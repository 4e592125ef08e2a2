import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeAll } from '../../src/azure/http.js';
import { fetchInstanceMetadataOnce, parseInstanceMetadata, placementOf } from '../../src/azure/imds.js';
import { DEFAULT_CONFIG, type ImdsConfig } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';
import { AGENT } from '../../src/core/version.js';
import { type FakeFabric, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { EXAMPLE_VM_ID, exampleImdsDocument, withOsProfile } from '../../src/fabric/imds-document.js';
import { errorOf } from '../support/errors.js';

let fabric: FakeFabric;
let config: ImdsConfig;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

beforeAll(async () => {
  fabric = await startFakeFabric();
  config = {
    ...DEFAULT_CONFIG.imds,
    endpoint: fabric.imdsUrl,
    connection_timeout_secs: 2,
    request_timeout_secs: 0.2,
  };
});
afterEach(() => {
  fabric.setImds();
  fabric.setImdsDocument(exampleImdsDocument());
});
afterAll(async () => {
  await closeAll();
  await fabric.close();
});

function errorOfSync(run: () => unknown): BootstateError {
  try {
    run();
  } catch (error) {
    if (error instanceof BootstateError) return error;
    throw error;
  }
  throw new Error('expected a BootstateError');
}

const minimal = (osProfile: Record<string, unknown>, publicKeys: unknown = []) =>
  JSON.stringify({ compute: { osProfile: { adminUsername: 'a', computerName: 'b', ...osProfile }, publicKeys } });

describe('fetchInstanceMetadataOnce', () => {
  it('returns the metadata provisioning needs from the example document', async () => {
    const metadata = await fetchInstanceMetadataOnce({ config });
    expect(metadata).toEqual({
      vmId: EXAMPLE_VM_ID,
      adminUsername: 'azureuser',
      computerName: 'web-01',
      disablePasswordAuthentication: true,
      publicKeys: [
        'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN/Rb85Ri4GtZokp7+G4Wiooo9ItAifFWeNtrUbNH45R azureuser@laptop\n',
      ],
      hasCustomData: false,
      ppsType: 'None',
      placement: {
        location: 'westeurope',
        vmSize: 'Standard_D2ds_v5',
        imageName: 'canonical:ubuntu-24_04-lts:server',
        imageVersion: '24.04.202510010',
      },
    });
  });

  it('sends GET with exactly the Metadata, User-Agent and request id headers', async () => {
    await fetchInstanceMetadataOnce({ config, requestId: '11111111-2222-4333-8444-555555555555' });
    const seen = fabric.requestsTo('imds').at(-1)!;
    expect(seen.method).toBe('GET');
    expect(seen.url).toBe('/metadata/instance?api-version=2023-11-15&extended=true');
    expect(seen.headers.metadata).toBe('true');
    expect(seen.headers['user-agent']).toBe(AGENT);
    expect(seen.headers['x-ms-client-request-id']).toBe('11111111-2222-4333-8444-555555555555');
    expect(seen.headers['x-forwarded-for']).toBeUndefined();
  });

  it('sends a fresh UUIDv4 request id on every attempt', async () => {
    fabric.setImds({ status: 500 }, 'ok');
    await errorOf(fetchInstanceMetadataOnce({ config }));
    await fetchInstanceMetadataOnce({ config });
    const ids = fabric.requestsTo('imds').slice(-2).map((r) => r.headers['x-ms-client-request-id']);
    expect(ids[0]).toMatch(UUID_V4);
    expect(ids[1]).toMatch(UUID_V4);
    expect(ids[0]).not.toBe(ids[1]);
  });

  it.each([400, 404, 410, 429, 500, 503])('classifies HTTP %i as a retryable status error', async (status) => {
    fabric.setImds({ status, headers: { 'retry-after': '3600' } });
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect(error.code).toBe('HTTP_STATUS');
    expect(error.retryable).toBe(true);
    expect(error.data).toEqual([
      ['endpoint', fabric.imdsUrl],
      ['status', String(status)],
    ]);
  });

  it.each([401, 403, 405, 408, 409, 501, 502, 504, 301, 302, 307, 304])(
    'classifies HTTP %i as a non-retryable status error',
    async (status) => {
      fabric.setImds({ status });
      const error = await errorOf(fetchInstanceMetadataOnce({ config }));
      expect(error.code).toBe('HTTP_STATUS');
      expect(error.retryable).toBe(false);
      expect(error.data).toContainEqual(['status', String(status)]);
    },
  );

  it('accepts any 2xx status with a valid document', async () => {
    fabric.setImds({ status: 203, body: exampleImdsDocument() });
    await expect(fetchInstanceMetadataOnce({ config })).resolves.toMatchObject({ adminUsername: 'azureuser' });
  });

  it('never follows a redirect to another host', async () => {
    const other = await startFakeFabric();
    try {
      fabric.setImds({ status: 302, headers: { location: other.imdsUrl } });
      const error = await errorOf(fetchInstanceMetadataOnce({ config }));
      expect(error.retryable).toBe(false);
      expect(other.requests).toHaveLength(0);
    } finally {
      await other.close();
    }
  });

  // A garbled body is no document IMDS wrote but damage in transit: asked again (azure-init's malformed_response).
  it('classifies a 200 whose body is not UTF-8 as a retryable parse error', async () => {
    fabric.setImds('invalid-utf8');
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect(error.code).toBe('IMDS_PARSE');
    expect(error.retryable).toBe(true);
  });

  it.each([
    ['truncated JSON', JSON.stringify(exampleImdsDocument()).slice(0, 300)],
    ['JSON cut inside a two-byte character', Buffer.from('{"compute":{"osProfile":{"adminUsername":"caf\u00e9"').subarray(0, -1)],
    ['an empty body', ''],
    ['text that is not JSON', 'not json, whoops'],
  ])('classifies a 200 with %s as a retryable parse error', async (_name, body) => {
    fabric.setImds({ status: 200, body });
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect([error.code, error.reason, error.retryable]).toEqual(['IMDS_PARSE', 'error parsing IMDS metadata', true]);
  });

  it('classifies the document cut to half with a Content-Length saying so (valid framing) as a retryable parse error', async () => {
    fabric.setImds('truncated-body');
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect([error.code, error.retryable]).toEqual(['IMDS_PARSE', true]);
    expect(error.data).toEqual([['error', expect.stringMatching(/^body of \d+ bytes is not valid JSON$/)]]);
  });

  it('classifies a body shorter than its Content-Length, the connection closed cleanly, as a retryable transport error', async () => {
    fabric.setImds('short-body');
    const error = await errorOf(fetchInstanceMetadataOnce({ config: { ...config, request_timeout_secs: 5 } }));
    expect([error.code, error.retryable]).toEqual(['HTTP_TRANSPORT', true]);
    expect(error.data).toContainEqual(['error', 'connection reset']);
  });

  it('names the offending field of a well-formed document with the wrong shape, not retryable', async () => {
    fabric.setImdsDocument(withOsProfile({ adminUsername: 42 }));
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect(error.code).toBe('IMDS_INVALID');
    expect(error.retryable).toBe(false);
    expect(error.data).toContainEqual(['key', 'compute.osProfile.adminUsername']);
  });

  /** The example document with the member at `path` set to `value` (`undefined` removes it). */
  const withMember = (path: string, value: unknown) => {
    const doc = exampleImdsDocument();
    const keys = path.split('.');
    const parent = keys.slice(0, -1).reduce((node, key) => node[key], doc);
    if (value === undefined) delete parent[keys.at(-1)!];
    else parent[keys.at(-1)!] = value;
    return doc;
  };

  it.each([
    ['a number where a string belongs', 'compute.osProfile.computerName', 42],
    ['null where a string belongs', 'compute.osProfile.adminUsername', null],
    ['a missing required field', 'compute.osProfile.computerName', undefined],
    ['a string where a list belongs', 'compute.publicKeys', 'ssh-ed25519 AAAA user@host'],
    ['a string where a boolean belongs', 'extended.compute.hasCustomData', 'true'],
    ['a number where a boolean or "true"/"false" belongs', 'compute.osProfile.disablePasswordAuthentication', 1],
    ['an object where a string belongs', 'compute.vmId', { id: 'x' }],
  ])('answers a 200 with %s by a non-retryable invalid IMDS metadata naming the key, after exactly 1 request', async (_name, key, value) => {
    fabric.setImdsDocument(withMember(key, value));
    const before = fabric.requestsTo('imds').length;
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect(fabric.requestsTo('imds').length - before).toBe(1);
    expect([error.code, error.reason, error.exitCode, error.retryable]).toEqual(['IMDS_INVALID', 'invalid IMDS metadata', 78, false]);
    expect(error.data[0]).toEqual(['key', key]);
    expect(error.data[1]).toEqual(['error', value === undefined ? 'required member is missing' : expect.stringMatching(/^expected .+, received (number|null|string|object)$/)]);
  });

  it('says an array is not the object a member must be, rather than naming a member of it', () => {
    const error = errorOfSync(() => parseInstanceMetadata(JSON.stringify({ compute: [] })));
    expect(error.data).toEqual([
      ['key', 'compute'],
      ['error', 'expected an object, received array'],
    ]);
  });

  it('classifies a stalled IMDS as a retryable request timeout within the attempt budget', async () => {
    fabric.setImds('stall');
    const started = Date.now();
    const error = await errorOf(fetchInstanceMetadataOnce({ config }));
    expect(error.code).toBe('HTTP_TRANSPORT');
    expect(error.retryable).toBe(true);
    expect(error.data).toContainEqual(['error', 'request timeout']);
    expect(Date.now() - started).toBeLessThan(200 + 1000);
  });

  it('refuses a 200 larger than max_body_bytes at once, naming the limit', async () => {
    fabric.setImds({ bigBody: 4 * 1024 * 1024 });
    const error = await errorOf(fetchInstanceMetadataOnce({ config: { ...config, request_timeout_secs: 10, max_body_bytes: 65536 } }));
    expect([error.code, error.retryable]).toEqual(['BODY_TOO_LARGE', false]);
    expect(error.data).toEqual([
      ['limit', '65536'],
      ['path', '/metadata/instance'],
    ]);
  });

  it('keeps a retryable status retryable when its error page is over max_body_bytes', async () => {
    fabric.setImds({ status: 503, body: 'x'.repeat(4096) });
    const error = await errorOf(fetchInstanceMetadataOnce({ config: { ...config, max_body_bytes: 1024 } }));
    expect([error.code, error.retryable]).toEqual(['HTTP_STATUS', true]);
    expect(error.data).toContainEqual(['status', '503']);
  });

  it('rejects promptly when its signal aborts', async () => {
    fabric.setImds('stall');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    const error = await errorOf(
      fetchInstanceMetadataOnce({ config: { ...config, request_timeout_secs: 60 }, signal: controller.signal }),
    );
    expect(error.data).toContainEqual(['error', 'aborted']);
    expect(Date.now() - started).toBeLessThan(500);
  });
});

describe('parseInstanceMetadata', () => {
  it.each([
    ['true', true],
    ['false', false],
    [true, true],
    [false, false],
  ])('reads disablePasswordAuthentication %j as %s', (value, expected) => {
    expect(parseInstanceMetadata(minimal({ disablePasswordAuthentication: value })).disablePasswordAuthentication).toBe(
      expected,
    );
  });

  it.each(['True', 'yes', '', 1, 0, null])('rejects disablePasswordAuthentication %j', (value) => {
    try {
      parseInstanceMetadata(minimal({ disablePasswordAuthentication: value }));
      expect.unreachable();
    } catch (error) {
      expect((error as BootstateError).code).toBe('IMDS_INVALID');
      expect((error as BootstateError).data).toContainEqual(['key', 'compute.osProfile.disablePasswordAuthentication']);
    }
  });

  it.each([
    ['compute.osProfile.computerName', JSON.stringify({ compute: { osProfile: { adminUsername: 'a', disablePasswordAuthentication: 'true' }, publicKeys: [] } })],
    ['compute.publicKeys', JSON.stringify({ compute: { osProfile: { adminUsername: 'a', computerName: 'b', disablePasswordAuthentication: 'true' } } })],
    ['compute.publicKeys.0.keyData', minimal({ disablePasswordAuthentication: 'true' }, [{ path: '/x' }])],
    ['compute.publicKeys.0.path', minimal({ disablePasswordAuthentication: 'true' }, [{ keyData: 'k', path: 3 }])],
    ['compute', '{}'],
    ['(document)', 'null'],
  ])('names %s when it is missing or mistyped', (key, text) => {
    try {
      parseInstanceMetadata(text);
      expect.unreachable();
    } catch (error) {
      expect((error as BootstateError).data).toContainEqual(['key', key]);
    }
  });

  it('ignores unknown fields and defaults the optional ones', () => {
    const text = JSON.stringify({
      compute: {
        osProfile: { adminUsername: 'a', computerName: 'b', disablePasswordAuthentication: 'false', extra: 1 },
        publicKeys: [],
        surprise: { deep: [1, 2] },
      },
      network: 'anything',
    });
    expect(parseInstanceMetadata(text)).toEqual({
      vmId: null,
      adminUsername: 'a',
      computerName: 'b',
      disablePasswordAuthentication: false,
      publicKeys: [],
      hasCustomData: false,
      ppsType: 'None',
    });
  });

  it('reads hasCustomData and ppsType from the extended block', () => {
    const doc = exampleImdsDocument();
    doc.extended.compute = { hasCustomData: true, ppsType: 'Running' };
    expect(parseInstanceMetadata(JSON.stringify(doc))).toMatchObject({ hasCustomData: true, ppsType: 'Running' });
  });

  it('only ever throws an IMDS BootstateError for arbitrary input: retryable for text that is not JSON, not for JSON', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.jsonValue().map((v) => JSON.stringify({ compute: v }))), (text) => {
        try {
          parseInstanceMetadata(text);
        } catch (error) {
          if (!(error instanceof BootstateError)) return false;
          const isJson = (() => {
            try {
              JSON.parse(text);
              return true;
            } catch {
              return false;
            }
          })();
          return isJson ? error.code === 'IMDS_INVALID' && !error.retryable : error.code === 'IMDS_PARSE' && error.retryable;
        }
        return true;
      }),
    );
  });

  it('returns exactly the fields of any valid document', () => {
    const key = fc.record({ keyData: fc.string() }, { requiredKeys: ['keyData'] });
    fc.assert(
      fc.property(
        fc.string(),
        fc.string(),
        fc.constantFrom<string | boolean>('true', 'false', true, false),
        fc.array(key),
        (adminUsername, computerName, disable, publicKeys) => {
          const text = JSON.stringify({
            compute: { osProfile: { adminUsername, computerName, disablePasswordAuthentication: disable }, publicKeys },
          });
          const metadata = parseInstanceMetadata(text);
          return (
            metadata.adminUsername === adminUsername &&
            metadata.computerName === computerName &&
            metadata.disablePasswordAuthentication === (disable === true || disable === 'true') &&
            metadata.publicKeys.join('\0') === publicKeys.map((k) => k.keyData).join('\0')
          );
        },
      ),
    );
  });
});

describe('placementOf (the run trace\'s region, size and image)', () => {
  it('reads a gallery image\'s id and leaves out what is absent, empty, oddly typed or not printable', () => {
    const doc = { compute: { location: 'eastus', vmSize: 7, storageProfile: { imageReference: { id: '/subscriptions/x/images/img', publisher: '' } }, version: 'a\u0000b' } };
    expect(placementOf(doc)).toEqual({ location: 'eastus', imageId: '/subscriptions/x/images/img' });
    expect(placementOf({ compute: {} })).toBeUndefined();
  });

  it('never throws and yields only short printable strings, whatever the document', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (compute, storage) => {
        const placement = placementOf({ compute: typeof compute === 'object' && compute !== null && !Array.isArray(compute) ? { ...compute, storageProfile: storage } : compute });
        for (const value of Object.values(placement ?? {})) expect(value).toMatch(/^[\x21-\x7e]{1,256}$|^[\x21-\x7e]+:[\x21-\x7e]+:[\x21-\x7e]+$/);
      }),
    );
  });
});
