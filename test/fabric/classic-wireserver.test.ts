/**
 * The classic wireserver protocol of the fake fabric, as WALinuxAgent 2.7 and cloud-init walk it: the version list,
 * the goal state and every document it links to, XML health reports told apart by the agent that sent them.
 */
import { request as httpRequest } from 'node:http';
import fc from 'fast-check';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { agentOf, healthKindsOf } from '../../src/fabric/agents.js';
import { type FakeFabric, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { CONTAINER_ID, parseWireHealthReport, ROLE_INSTANCE_ID, WIRE_PROTOCOL_VERSION } from '../../src/fabric/goal-state.js';

let fabric: FakeFabric | undefined;
afterEach(async () => {
  await fabric?.close();
  fabric = undefined;
});

const WAAGENT = 'WALinuxAgent/2.7.3.0';

function call(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: { 'user-agent': WAAGENT, ...options.headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const wireBase = (f: FakeFabric) => f.healthUrl.replace('/provisioning/health', '');
const parse = (xml: string) => new XMLParser({ ignoreAttributes: false, parseTagValue: false }).parse(xml) as Record<string, any>;

/** A health report shaped as the classic agents build theirs (escaped text, details only with a substatus). */
function healthXml(state: string, subStatus?: string, description = ''): string {
  const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const details = subStatus === undefined ? '' : `<Details><SubStatus>${esc(subStatus)}</SubStatus><Description>${esc(description)}</Description></Details>`;
  return (
    '<?xml version="1.0" encoding="utf-8"?><Health xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">' +
    `<GoalStateIncarnation>1</GoalStateIncarnation><Container><ContainerId>${CONTAINER_ID}</ContainerId><RoleInstanceList><Role>` +
    `<InstanceId>${ROLE_INSTANCE_ID}</InstanceId><Health><State>${state}</State>${details}</Health></Role></RoleInstanceList></Container></Health>`
  );
}

describe('the classic wireserver of the fake fabric', () => {
  it('names the wire protocol version the peers ask for as preferred', async () => {
    fabric = await startFakeFabric();
    const res = await call(`${wireBase(fabric)}/?comp=versions`);
    expect(res.status).toBe(200);
    expect(parse(res.body).Versions.Preferred.Version).toBe(WIRE_PROTOCOL_VERSION);
    expect(fabric.requests.at(-1)).toMatchObject({ route: 'versions', userAgent: WAAGENT, agent: 'WALinuxAgent' });
  });

  it('serves a goal state whose every linked document answers well-formed XML', async () => {
    fabric = await startFakeFabric();
    const goal = await call(`${wireBase(fabric)}/machine/?comp=goalstate`, { headers: { 'x-ms-version': WIRE_PROTOCOL_VERSION } });
    expect(goal.status).toBe(200);
    const doc = parse(goal.body).GoalState;
    expect(doc.Incarnation).toBe('1');
    expect(doc.Container.ContainerId).toBe(CONTAINER_ID);
    const instance = doc.Container.RoleInstanceList.RoleInstance;
    expect(instance.InstanceId).toBe(ROLE_INSTANCE_ID);
    expect(instance.Configuration.Certificates).toBeUndefined();
    const links = ['HostingEnvironmentConfig', 'SharedConfig', 'ExtensionsConfig'].map((k) => instance.Configuration[k] as string);
    const routes = [];
    for (const link of links) {
      expect(link.startsWith(`${wireBase(fabric)}/machine/`)).toBe(true);
      const res = await call(link);
      expect(res.status).toBe(200);
      expect(XMLValidator.validate(res.body)).toBe(true);
      routes.push(fabric.requests.at(-1)!.route);
    }
    expect(routes).toEqual(['hostingEnvironmentConfig', 'sharedConfig', 'extensionsConfig']);
    const extensions = parse((await call(links[2]!)).body).Extensions;
    expect(extensions.StatusUploadBlob['@_statusBlobType']).toBe('BlockBlob');
    expect(parse((await call(links[0]!)).body).HostingEnvironmentConfig.Incarnation['@_instance']).toBe(exampleImdsDocument().compute.name);
  });

  it('links and serves a Certificates document only when the fabric was given one', async () => {
    const seen: string[] = [];
    fabric = await startFakeFabric({
      certificates: (request) => {
        seen.push(String(request.headers['x-ms-guest-agent-public-x509-cert']));
        return '<?xml version="1.0" encoding="utf-8"?><CertificateFile><Version>2012-11-30</Version><Format>Pkcs7BlobWithPfxContents</Format><Data>AAAA</Data></CertificateFile>';
      },
    });
    const doc = parse((await call(`${wireBase(fabric)}/machine/?comp=goalstate`)).body).GoalState;
    const link = doc.Container.RoleInstanceList.RoleInstance.Configuration.Certificates as string;
    expect(link).toContain('type=certificates');
    const res = await call(link, { headers: { 'x-ms-guest-agent-public-x509-cert': 'MIIB-transport' } });
    expect(res.status).toBe(200);
    expect(parse(res.body).CertificateFile.Data).toBe('AAAA');
    expect(seen).toEqual(['MIIB-transport']);
    expect(fabric.requests.at(-1)!.route).toBe('certificates');

    await fabric.close();
    fabric = await startFakeFabric();
    expect((await call(`${wireBase(fabric)}/machine/${CONTAINER_ID}/x?comp=config&type=certificates&incarnation=1`)).status).toBe(404);
  });

  it('takes XML health reports and lists every agent’s reports in arrival order', async () => {
    fabric = await startFakeFabric();
    await call(fabric.healthUrl, { method: 'POST', headers: { 'user-agent': 'bootstate/0.1.0', 'content-type': 'application/json' }, body: '{"state":"Ready"}' });
    const xmlPost = (body: string, agent = WAAGENT) =>
      call(`${wireBase(fabric!)}/machine?comp=health`, { method: 'POST', headers: { 'user-agent': agent, 'content-type': 'text/xml;charset=utf-8' }, body });
    expect((await xmlPost(healthXml('NotReady', 'ProvisioningFailed', 'no <user> & no key'))).status).toBe(200);
    expect((await xmlPost(healthXml('Ready'), 'Cloud-Init/22.4.2')).status).toBe(200);
    expect(fabric.healthReports.map((r) => [r.agent, r.protocol, r.state, r.subStatus])).toEqual([
      ['bootstate', 'json', 'Ready', undefined],
      ['WALinuxAgent', 'xml', 'NotReady', 'ProvisioningFailed'],
      ['cloud-init', 'xml', 'Ready', undefined],
    ]);
    expect(healthKindsOf(fabric.requests)).toEqual(['bootstate:Ready', 'WALinuxAgent:NotReady/ProvisioningFailed', 'cloud-init:Ready']);
  });

  it('refuses a health report it cannot read with 400 and does not count it', async () => {
    fabric = await startFakeFabric();
    const post = (body: string) => call(`${wireBase(fabric!)}/machine?comp=health`, { method: 'POST', body });
    const bad = [await post('<Health><oops'), await post(healthXml('Maybe')), await post('<Health><Container/></Health>')];
    expect(bad.map((r) => r.status)).toEqual([400, 400, 400]);
    expect(bad[1]!.body).toContain('neither Ready nor NotReady');
    expect(fabric.healthReports).toEqual([]);
    expect(fabric.requestsTo('wireHealth')).toHaveLength(3);
  });

  it('routes telemetry, role properties and the host plugin’s status channel; vmSettings is not supported', async () => {
    fabric = await startFakeFabric();
    expect((await call(`${wireBase(fabric)}/machine?comp=telemetrydata`, { method: 'POST', body: '<TelemetryData/>' })).status).toBe(200);
    expect((await call(`${wireBase(fabric)}/machine?comp=roleProperties`, { method: 'POST', body: '<RoleProperties/>' })).status).toBe(200);
    expect((await call(`${fabric.hostPluginUrl}/status`, { method: 'PUT', body: '{}' })).status).toBe(200);
    expect((await call(`${fabric.hostPluginUrl}/vmSettings`)).status).toBe(404);
    expect(fabric.requests.map((r) => r.route)).toEqual(['telemetry', 'roleProperties', 'hostPluginStatus', 'hostPluginVmSettings']);
  });
});

describe('agentOf', () => {
  it('names the agents by their User-Agent product', () => {
    expect(agentOf('bootstate/0.1.0')).toBe('bootstate');
    expect(agentOf('bootstate/0.1.0+health')).toBe('bootstate');
    expect(agentOf('WALinuxAgent/2.7.3.0')).toBe('WALinuxAgent');
    expect(agentOf('WALinuxAgent/2.7.3.0+health')).toBe('WALinuxAgent');
    expect(agentOf('Cloud-Init/22.4.2')).toBe('cloud-init');
    expect(agentOf('python-requests/2.28.1')).toBe('unknown');
    expect(agentOf(undefined)).toBe('unknown');
  });
});

describe('parseWireHealthReport', () => {
  it('reads back any state, substatus and description a classic agent escapes into a report', () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 80 }).filter((t) => !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff\r]/u.test(t));
    fc.assert(
      fc.property(fc.constantFrom('Ready', 'NotReady'), fc.option(text.filter((t) => t.length > 0), { nil: undefined }), text, (state, subStatus, description) => {
        const report = parseWireHealthReport(healthXml(state, subStatus, description));
        expect(report).toMatchObject({ state, incarnation: '1', containerId: CONTAINER_ID, instanceId: ROLE_INSTANCE_ID });
        expect(report.subStatus).toBe(subStatus);
        if (subStatus !== undefined) expect(report.description).toBe(description);
      }),
    );
  });

  it('throws a clear error for anything that is not one role’s report', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (junk) => {
        try {
          parseWireHealthReport(junk);
        } catch (error) {
          expect((error as Error).message).toMatch(/^health report /);
        }
      }),
    );
  });
});
