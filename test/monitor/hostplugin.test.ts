import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { classifyHealth, classifyVersions, failedAtHostPlugin, HostPluginClient } from '../../src/azure/hostplugin.js';
import { AGENT } from '../../src/core/version.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { refusedPort } from './helpers.js';

describe('host plugin status classification', () => {
  it('counts 200, 201 and 202 as a live plugin', () => {
    for (const status of [200, 201, 202]) expect(classifyHealth(status).ok).toBe(true);
  });

  it('treats 502 as an upstream failure, not a plugin fault', () => {
    expect(failedAtHostPlugin(502)).toBe(false);
    expect(classifyHealth(502)).toEqual({ ok: true, value: '' });
  });

  it('counts every other status as a failed heartbeat', () => {
    for (const status of [204, 400, 404, 500, 503, 505]) expect(classifyHealth(status)).toEqual({ ok: false, value: `HTTP status ${status}` });
  });

  it('finds the plugin available only when its versions list names 2015-09-01', () => {
    expect(classifyVersions(200, '["2015-09-01","2012-11-30"]')).toEqual({ ok: true, available: true, value: '' });
    expect(classifyVersions(200, '["2012-11-30"]')).toEqual({ ok: true, available: false, value: 'version 2015-09-01 not supported' });
    expect(classifyVersions(200, '{"v":"2015-09-01"}').available).toBe(false);
    expect(classifyVersions(200, 'not json')).toEqual({ ok: true, available: false, value: 'versions list is not JSON' });
  });

  it('reports versions unhealthy only for a server error of the plugin itself', () => {
    expect(classifyVersions(500, '')).toEqual({ ok: false, available: false, value: 'HTTP status 500' });
    expect(classifyVersions(502, '')).toEqual({ ok: true, available: false, value: 'HTTP status 502' });
    expect(classifyVersions(404, '')).toEqual({ ok: true, available: false, value: 'HTTP status 404' });
  });
});

describe('host plugin over loopback', () => {
  let fabric: FakeFabric;
  beforeEach(async () => {
    fabric = await startFakeFabric();
  });
  afterEach(async () => {
    await fabric.close();
  });
  const options = { requestTimeoutMs: 2_000 };

  it('sends GET /health with our User-Agent and reads a 200 as alive', async () => {
    const plugin = new HostPluginClient(fabric.hostPluginUrl);
    expect(await plugin.checkHealth(options)).toEqual({ ok: true, value: '' });
    const [request] = fabric.requestsTo('hostPluginHealth');
    expect([request.method, request.url, request.headers['user-agent']]).toEqual(['GET', '/health', AGENT]);
  });

  it('reads a 502 from /health as alive and a 500 as a failure', async () => {
    fabric.setHostPlugin({ status: 502 }, { status: 500 });
    const plugin = new HostPluginClient(fabric.hostPluginUrl);
    expect((await plugin.checkHealth(options)).ok).toBe(true);
    expect((await plugin.checkHealth(options)).ok).toBe(false);
  });

  it('makes exactly one attempt and counts a refused connection as a failure', async () => {
    const plugin = new HostPluginClient(`http://127.0.0.1:${await refusedPort()}`);
    const result = await plugin.checkHealth(options);
    expect(result.ok).toBe(false);
    expect(result.value).toContain('connection refused');
  });

  it('counts a stalled /health as a failure once the request timeout passes', async () => {
    fabric.setHostPlugin('stall');
    const plugin = new HostPluginClient(fabric.hostPluginUrl);
    const result = await plugin.checkHealth({ requestTimeoutMs: 200 });
    expect(result.ok).toBe(false);
    expect(result.value).toContain('request timeout');
    expect(fabric.requestsTo('hostPluginHealth')).toHaveLength(1);
  });

  it('ends a check at once when its signal aborts', async () => {
    fabric.setHostPlugin('stall');
    const plugin = new HostPluginClient(fabric.hostPluginUrl);
    const abort = new AbortController();
    const pending = plugin.checkHealth({ requestTimeoutMs: 30_000, signal: abort.signal });
    await fabric.waitForRequests('hostPluginHealth', 1);
    abort.abort();
    expect((await pending).value).toContain('aborted');
  });

  it('reads the fabric versions list as available', async () => {
    const plugin = new HostPluginClient(fabric.hostPluginUrl);
    expect(await plugin.checkVersions(options)).toEqual({ ok: true, available: true, value: '' });
    expect(fabric.requestsTo('hostPluginVersions')[0].url).toBe('/versions');
  });

  it('records a 200 from /versions too large to read as a failed check naming the limit, without throwing', async () => {
    fabric.setHostPluginVersions({ bigBody: 1024 * 1024 });
    const plugin = new HostPluginClient(fabric.hostPluginUrl);
    expect(await plugin.checkVersions(options)).toEqual({
      ok: false,
      available: false,
      value: 'response body from /versions is larger than 65536 bytes',
    });
  });

  it('reports /versions unavailable and unhealthy when the plugin cannot be reached', async () => {
    const plugin = new HostPluginClient(`http://127.0.0.1:${await refusedPort()}`);
    expect(await plugin.checkVersions(options)).toMatchObject({ ok: false, available: false });
  });
});
