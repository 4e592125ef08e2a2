/**
 * The goal state and Certificates requests against the fake fabric on loopback, with real openssl on both sides:
 * the fabric envelopes a PKCS#12 bundle to the transport certificate the client sent, the client opens it.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fetchCertificatesOnce, fetchGoalStateOnce, parseCertificatesDocument, parseGoalState } from '../../src/azure/goal-state.js';
import { DEFAULT_CONFIG, type WireserverConfig } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';
import { makeCertificate, type FabricCertificate } from '../../src/fabric/certificates.js';
import { configUrl, goalStateDocument } from '../../src/fabric/goal-state.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { openCertificates, withTransportCertificate } from '../../src/os/certificates/certificate-bundle.js';

let fabric: FakeFabric;
let config: WireserverConfig;
let work: string;
let owner: FabricCertificate & { thumbprint: string };
let other: FabricCertificate & { thumbprint: string };

beforeAll(async () => {
  [owner, other] = await Promise.all([makeCertificate('owner-key'), makeCertificate('app-cert', 'ec:P-256')]);
});
beforeEach(async () => {
  fabric = await startFakeFabric();
  config = { ...DEFAULT_CONFIG.wireserver, health_endpoint: fabric.healthUrl, connection_timeout_secs: 5, read_timeout_secs: 5 };
  work = await mkdtemp(path.join(tmpdir(), 'goal-state-'));
});
afterEach(async () => {
  await fabric.close();
  await rm(work, { recursive: true, force: true });
});
afterAll(() => undefined);

const caught = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error as BootstateError);

describe('goal state', () => {
  it('asks the configured wireserver with x-ms-version, and finds no Certificates URL when the VM has none', async () => {
    expect(await fetchGoalStateOnce({ config })).toEqual({ incarnation: '1', certificatesPath: null });
    const [request] = fabric.requestsTo('goalState');
    expect(request!.url).toBe('/machine/?comp=goalstate');
    expect(request!.headers['x-ms-version']).toBe('2012-11-30');
  });

  it('takes only the path and query of the Certificates URL, so the request stays on the configured wireserver', async () => {
    fabric.setCertificates([owner]);
    const linked = new URL(configUrl(new URL(fabric.healthUrl).origin, 'certificates', 1));
    expect(await fetchGoalStateOnce({ config })).toEqual({ incarnation: '1', certificatesPath: `${linked.pathname}${linked.search}` });
    const elsewhere = goalStateDocument({ base: 'http://10.9.9.9:8080', incarnation: 2, certificates: true, statusBlobUrl: 'http://10.9.9.9/s' });
    expect(parseGoalState(elsewhere).certificatesPath).toMatch(/^\/machine\/.*\?comp=config&type=certificates&incarnation=2$/);
  });

  it('classifies answers: 500, 503, 410 and 429 are worth another attempt, 404 and 403 are not', async () => {
    for (const [status, retryable] of [[500, true], [503, true], [410, true], [429, true], [404, false], [403, false]] as const) {
      fabric.setBehaviour('goalState', { status, body: 'no' });
      expect(await caught(fetchGoalStateOnce({ config }))).toMatchObject({ code: 'HTTP_STATUS', retryable, data: expect.arrayContaining([['status', String(status)]]) });
    }
    fabric.setBehaviour('goalState', { status: 200, body: 'not xml <' });
    expect(await caught(fetchGoalStateOnce({ config }))).toMatchObject({ code: 'CERTIFICATES_FAILED', retryable: false });
  });

  it('never throws anything but a BootstateError on any document, and never follows a DOCTYPE', () => {
    const base = goalStateDocument({ base: 'http://168.63.129.16:80', incarnation: 1, certificates: true, statusBlobUrl: 'http://168.63.129.16/s' });
    const mutated = fc.tuple(fc.nat(base.length), fc.nat(30), fc.string({ maxLength: 8 })).map(([at, cut, insert]) => base.slice(0, at) + insert + base.slice(at + cut));
    fc.assert(
      fc.property(fc.oneof(fc.string(), mutated), (doc) => {
        for (const parse of [parseGoalState, parseCertificatesDocument]) {
          try {
            parse(doc);
          } catch (error) {
            expect(error).toBeInstanceOf(BootstateError);
          }
        }
      }),
      { numRuns: 300 },
    );
    expect(() => parseGoalState('<!DOCTYPE x [<!ENTITY a "b">]><GoalState/>')).toThrow(/DOCTYPE/);
  });
});

describe('Certificates', () => {
  it('sends the transport certificate as base64 DER and opens the bundle: every certificate by thumbprint, keys matched', async () => {
    fabric.setCertificates([owner, other]);
    const goal = await fetchGoalStateOnce({ config });
    let dir = '';
    const bundle = await withTransportCertificate(work, {}, async (transport) => {
      dir = transport.dir;
      expect((await stat(dir)).mode & 0o777).toBe(0o700);
      expect(new X509Certificate(Buffer.from(transport.certificateBase64, 'base64')).subject).toBe('CN=LinuxTransport');
      const cms = await fetchCertificatesOnce({ config }, goal.certificatesPath!, transport.certificateBase64);
      return openCertificates(transport, cms);
    });
    expect(existsSync(dir)).toBe(false);
    expect(await readdir(work)).toEqual([]);
    const [request] = fabric.requestsTo('certificates');
    expect(request!.headers['x-ms-cipher-name']).toBe('DES_EDE3_CBC');
    expect(request!.headers['x-ms-guest-agent-public-x509-cert']).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(bundle.map((c) => c.thumbprint).sort()).toEqual([owner.thumbprint, other.thumbprint].sort());
    expect(bundle.find((c) => c.thumbprint === owner.thumbprint)!.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(bundle.find((c) => c.thumbprint === other.thumbprint)!.privateKeyPem).toBeUndefined();
  });

  it('a blob that does not decrypt with the transport key is CERTIFICATES_FAILED, not retried, and the key directory is gone', async () => {
    fabric.setCertificates([owner]);
    const goal = await fetchGoalStateOnce({ config });
    // Enveloped for another transport certificate: what a VM gets when it sent one and answers with another.
    const foreign = await withTransportCertificate(work, {}, (t) => fetchCertificatesOnce({ config }, goal.certificatesPath!, t.certificateBase64));
    const error = await caught(withTransportCertificate(work, {}, (t) => openCertificates(t, foreign)));
    expect(error).toMatchObject({ code: 'CERTIFICATES_FAILED', retryable: false });
    expect(new Map(error!.data).get('problem')).toMatch(/^openssl could not decrypt the Certificates blob with the transport key/);
    expect(await readdir(work)).toEqual([]);
  });

  it('removes the key directory when aborted while openssl runs', async () => {
    const controller = new AbortController();
    const pending = caught(withTransportCertificate(work, { signal: controller.signal }, async () => undefined));
    controller.abort();
    expect(await pending).toBeInstanceOf(BootstateError);
    expect(await readdir(work)).toEqual([]);
  });

  it('reads the Data of a CertificateFile and refuses another format or a missing Data', () => {
    expect(parseCertificatesDocument('<CertificateFile><Format>Pkcs7BlobWithPfxContents</Format><Data>AAEC\nAw==</Data></CertificateFile>')).toEqual(Buffer.from([0, 1, 2, 3]));
    expect(() => parseCertificatesDocument('<CertificateFile><Format>Other</Format><Data>AA==</Data></CertificateFile>')).toThrow(/format is Other/);
    expect(() => parseCertificatesDocument('<CertificateFile></CertificateFile>')).toThrow(/no Data/);
  });
});
