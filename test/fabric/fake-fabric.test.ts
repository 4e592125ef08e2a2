import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeFabric, startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { EXAMPLE_VM_ID } from '../../src/fabric/imds-document.js';
import { applyScenario } from '../../src/fabric/scenarios.js';

let fabric: FakeFabric | undefined;
afterEach(async () => {
  await fabric?.close();
  fabric = undefined;
});

/** A plain node:http client, so the fabric is tested independently of the agent's own HTTP code. */
function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: Buffer; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const metadata = { Metadata: 'true' };
const post = (url: string, body: unknown) => call(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('startFakeFabric', () => {
  it('serves the example document to requests that carry Metadata: true', async () => {
    fabric = await startFakeFabric();
    const res = await call(fabric.imdsUrl, { headers: metadata });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString()).compute.vmId).toBe(EXAMPLE_VM_ID);
    expect(fabric.imdsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metadata\/instance\?api-version=2023-11-15&extended=true$/);
  });

  it('answers 400 like IMDS when the Metadata header is missing', async () => {
    fabric = await startFakeFabric();
    expect((await call(fabric.imdsUrl)).status).toBe(400);
  });

  it('plays the scripted queue, then repeats the last behaviour', async () => {
    fabric = await startFakeFabric();
    fabric.setImds({ status: 500 }, { status: 429 }, { status: 404 });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await call(fabric.imdsUrl, { headers: metadata })).status);
    expect(statuses).toEqual([500, 429, 404, 404]);
  });

  it('records requests and parses health reports in arrival order', async () => {
    fabric = await startFakeFabric();
    await post(fabric.healthUrl, { state: 'NotReady' });
    await post(fabric.healthUrl, { state: 'Ready' });
    await post(fabric.healthServiceUrl, { Api: 'reporttargethealth' });
    expect(fabric.reports).toEqual([{ state: 'NotReady' }, { state: 'Ready' }]);
    expect(fabric.requests.map((r) => r.route)).toEqual(['health', 'health', 'healthService']);
    expect(fabric.requestsTo('healthService')[0].body).toBe('{"Api":"reporttargethealth"}');
  });

  it('serves the host plugin health and versions', async () => {
    fabric = await startFakeFabric();
    expect((await call(`${fabric.hostPluginUrl}/health`)).status).toBe(200);
    const versions = await call(`${fabric.hostPluginUrl}/versions`);
    expect(JSON.parse(versions.body.toString())).toContain('2015-09-01');
    fabric.setHostPlugin({ status: 500 });
    expect((await call(`${fabric.hostPluginUrl}/health`)).status).toBe(500);
  });

  it('answers 404 to unknown paths and records them without a route', async () => {
    fabric = await startFakeFabric();
    expect((await call(`${fabric.hostPluginUrl}/nope`)).status).toBe(404);
    expect(fabric.requests.at(-1)!.route).toBeNull();
  });

  it('holds a gated answer until the gate opens', async () => {
    fabric = await startFakeFabric();
    let open!: () => void;
    fabric.setWireserver({ gate: new Promise<void>((resolve) => (open = resolve)), then: { status: 202 } });
    let answered = false;
    const pending = post(fabric.healthUrl, { state: 'Ready' }).then((res) => {
      answered = true;
      return res;
    });
    await fabric.waitForRequests('health', 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(answered).toBe(false);
    open();
    expect((await pending).status).toBe(202);
  });

  it('adds latency with delayMs', async () => {
    fabric = await startFakeFabric();
    fabric.setImds({ delayMs: 150 });
    const started = Date.now();
    await call(fabric.imdsUrl, { headers: metadata });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('sends a streamed body of the requested size without Content-Length', async () => {
    fabric = await startFakeFabric();
    fabric.setImds({ bigBody: 300_000 });
    const res = await call(fabric.imdsUrl, { headers: metadata });
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.body.length).toBe(300_000);
    expect(() => JSON.parse(res.body.toString())).not.toThrow();
  });

  it('sends bytes that are not valid UTF-8', async () => {
    fabric = await startFakeFabric();
    fabric.setImds('invalid-utf8');
    const res = await call(fabric.imdsUrl, { headers: metadata });
    expect(() => new TextDecoder('utf-8', { fatal: true }).decode(res.body)).toThrow();
  });

  it('cuts the document to its first half with a Content-Length that says so: valid framing, no JSON', async () => {
    fabric = await startFakeFabric();
    const whole = (await call(fabric.imdsUrl, { headers: metadata })).body;
    fabric.setImds('truncated-body');
    const res = await call(fabric.imdsUrl, { headers: metadata });
    expect([res.status, res.headers['content-length']]).toEqual([200, String(res.body.length)]);
    expect(res.body).toEqual(whole.subarray(0, whole.length >> 1));
    expect(() => JSON.parse(res.body.toString())).toThrow();
  });

  it('sends half the body its Content-Length announces, then closes the connection cleanly', async () => {
    fabric = await startFakeFabric();
    fabric.setImds('short-body');
    await expect(call(fabric.imdsUrl, { headers: metadata })).rejects.toThrow(/aborted|closed|ECONNRESET/i);
  });

  it('resets the connection in the middle of the body', async () => {
    fabric = await startFakeFabric();
    fabric.setImds('reset-mid-body');
    await expect(call(fabric.imdsUrl, { headers: metadata })).rejects.toThrow();
  });

  it('closes at once even with a stalled request open', async () => {
    fabric = await startFakeFabric();
    fabric.setImds('stall');
    const stalled = call(fabric.imdsUrl, { headers: metadata }).catch((error: Error) => error);
    await fabric.waitForRequests('imds', 1);
    const started = Date.now();
    await fabric.close();
    fabric = undefined;
    expect(Date.now() - started).toBeLessThan(500);
    expect(await stalled).toBeInstanceOf(Error);
  });

  it('listens on the host and port it is given', async () => {
    const probe = await startFakeFabric();
    const port = probe.ports.imds;
    await probe.close();
    fabric = await startFakeFabric({ imds: { host: '127.0.0.1', port } });
    expect(fabric.ports.imds).toBe(port);
  });
});

describe('scenarios', () => {
  it('ready-rejected-once refuses the first Ready only', async () => {
    fabric = await startFakeFabric();
    applyScenario(fabric, 'ready-rejected-once');
    expect((await post(fabric.healthUrl, { state: 'NotReady' })).status).toBe(200);
    expect((await post(fabric.healthUrl, { state: 'Ready' })).status).toBe(403);
    expect((await post(fabric.healthUrl, { state: 'Ready' })).status).toBe(200);
  });

  it.each([
    ['password-auth', 'disablePasswordAuthentication', 'false'],
    ['hostile-username', 'adminUsername', '-oops;rm'],
  ])('%s changes the served osProfile', async (name, field, value) => {
    fabric = await startFakeFabric();
    applyScenario(fabric, name);
    const doc = JSON.parse((await call(fabric.imdsUrl, { headers: metadata })).body.toString());
    expect(doc.compute.osProfile[field]).toBe(value);
  });

  it('imds-down answers 403 forever', async () => {
    fabric = await startFakeFabric();
    applyScenario(fabric, 'imds-down');
    for (let i = 0; i < 3; i++) expect((await call(fabric.imdsUrl, { headers: metadata })).status).toBe(403);
  });

  it('rejects an unknown scenario name', async () => {
    fabric = await startFakeFabric();
    expect(() => applyScenario(fabric!, 'nope')).toThrow(/unknown scenario/);
  });
});

describe('serve.ts', () => {
  it('prints a ready line, serves the scenario and the document file, and records requests as JSON lines', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fake-fabric-'));
    const record = join(dir, 'requests.jsonl');
    const docFile = join(dir, 'doc.json');
    await writeFile(
      docFile,
      JSON.stringify({ compute: { osProfile: { adminUsername: 'fromfile', computerName: 'h', disablePasswordAuthentication: 'true' }, publicKeys: [] } }),
    );
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fabric/serve.ts', '--imds', '127.0.0.1:0', '--record', record, '--scenario', 'ready-rejected-once', '--imds-doc', docFile],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`serve.ts exited with ${code}`)));
      });
      const ready = JSON.parse(line);
      expect(ready).toMatchObject({ ready: true, scenario: 'ready-rejected-once' });
      const doc = JSON.parse((await call(ready.imdsUrl, { headers: metadata })).body.toString());
      expect(doc.compute.osProfile.adminUsername).toBe('fromfile');
      expect((await post(ready.healthUrl, { state: 'Ready' })).status).toBe(403);
      const lines = (await readFile(record, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
      expect(lines.map((r) => r.route)).toEqual(['imds', 'health']);
      expect(lines[1].body).toBe('{"state":"Ready"}');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
