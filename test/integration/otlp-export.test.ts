/**
 * The run's OpenTelemetry trace, end to end: the built agent against the fake fabric on loopback, exporting to a
 * real OTLP/HTTP receiver on loopback that decodes with the definitions generated from opentelemetry-proto
 * (test/support/otlp-receiver.ts). A first boot, a failed one and a pool VM each arrive as one trace — one root span,
 * a span per state in the journal's order, the invocations under their states with their attributes, the VM's
 * resource — with no secret in any byte; a collector that is down, refuses or stalls costs one warning and the run
 * still succeeds. A default run reads neither the script that holds the SDK nor any of its code. The JSON bodies sent,
 * written one per line as a collector's file export, are what `bootstate fleet` reads back.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { activePaths } from '../../src/core/state-path.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import type { JournalLine } from '../../src/inspect/journal.js';
import { downUrl, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan, type ReceivedTrace } from '../support/otlp-receiver.js';
import { AGENT, runAgent, type AgentOptions, type AgentRun } from './agent.js';

const tag = randomBytes(6).toString('hex');
const PASSWORD = `S3cr3t-Canary-${tag}`;
const CUSTOM_TEXT = `CanaryCustom-${tag}`;
const CUSTOM = Buffer.from(CUSTOM_TEXT).toString('base64');
const NEEDLES = [PASSWORD, CUSTOM, CUSTOM_TEXT, tag];

/** The example document with secrets planted where IMDS could carry them. */
function plantedDocument(): Record<string, any> {
  const doc = exampleImdsDocument();
  doc.compute.userData = CUSTOM;
  doc.compute.customData = CUSTOM;
  doc.compute.osProfile.adminPassword = PASSWORD;
  doc.compute.tagsList = [{ name: 'password', value: PASSWORD }];
  return doc;
}

let fabric: FakeFabric;
let receiver: OtlpReceiver;
beforeAll(async () => {
  fabric = await startFakeFabric();
});
afterAll(async () => {
  await fabric.close();
});
afterEach(async () => {
  await receiver?.close();
  fabric.setImds();
  fabric.setWireserver();
  fabric.setImdsDocument(exampleImdsDocument());
});

/** A run exporting to `endpoint` through the standard environment variable. */
async function exportingRun(endpoint: string, options: AgentOptions = {}): Promise<AgentRun> {
  return runAgent(fabric, { ...options, env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, ...options.env } });
}

/** The states the journal says the run went through, each path once per entry, in order. */
function journalStates(root: string): string[] {
  const dir = join(root, 'var/lib/bootstate/runs');
  const lines = readFileSync(join(dir, readdirSync(dir)[0]!), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as JournalLine);
  const out: string[] = [];
  let active = new Set<string>();
  for (const line of lines) {
    const now = activePaths(line.value);
    for (const path of now) if (!active.has(path)) out.push(path);
    active = new Set(now);
  }
  return out;
}

/** The one trace received, checked for its shape: one trace id, one root, every parent present. */
function oneTrace(run: AgentRun): { trace: ReceivedTrace; root: ReceivedSpan; states: ReceivedSpan[]; actors: ReceivedSpan[] } {
  expect(receiver.traces, run.stderr).toHaveLength(1);
  const trace = receiver.traces[0]!;
  expect(new Set(trace.spans.map((span) => span.traceId)).size).toBe(1);
  const roots = trace.spans.filter((span) => span.parentSpanId === '');
  expect(roots.map((span) => span.name)).toEqual(['provision']);
  const ids = new Set(trace.spans.map((span) => span.spanId));
  for (const span of trace.spans) if (span.parentSpanId) expect(ids.has(span.parentSpanId)).toBe(true);
  for (const span of trace.spans) expect(span.end >= span.start).toBe(true);
  const byStart = (a: ReceivedSpan, b: ReceivedSpan) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0);
  const states = trace.spans.filter((span) => 'bootstate.state' in span.attributes).sort(byStart);
  const actors = trace.spans.filter((span) => span.name.startsWith('invoke ')).sort(byStart);
  return { trace, root: roots[0]!, states, actors };
}

/** No planted secret in any byte the receiver got. */
function expectNoSecret(): void {
  const all = Buffer.concat(receiver.bodies).toString('latin1');
  for (const needle of NEEDLES) expect(all).not.toContain(needle);
  expect(JSON.stringify(receiver.traces, (_key, value) => (typeof value === 'bigint' ? String(value) : value))).not.toContain(tag);
}

describe('a run exported over OTLP/HTTP', () => {
  it('a first boot: one root, a span per state in the journal\'s order, the invocations under their states, the VM as resource', async () => {
    receiver = await startOtlpReceiver();
    fabric.setImdsDocument(plantedDocument());
    const run = await exportingRun(receiver.url);
    expect(run.code, run.stderr).toBe(0);
    const { trace, root, states, actors } = oneTrace(run);
    expect(trace.contentType).toBe('application/x-protobuf');
    expect(states.map((span) => span.attributes['bootstate.state'])).toEqual(journalStates(run.root));
    // The top-level states are the root's children, in order; nested ones under their parent state.
    const rootChildren = states.filter((span) => span.parentSpanId === root.spanId).map((span) => span.name);
    expect(rootChildren).toEqual(journalStates(run.root).filter((path) => !path.includes('.')));
    expect(root.attributes).toMatchObject({ 'bootstate.result': 'provisioned', 'bootstate.exit_code': 0 });
    expect(root.status.code).not.toBe(2);
    const imds = actors.find((span) => span.attributes['bootstate.step'] === 'imds');
    expect(imds?.attributes).toMatchObject({ 'bootstate.attempt': 1, 'bootstate.outcome': 'done' });
    expect(states.find((span) => span.spanId === imds!.parentSpanId)?.name).toMatch(/imds/);
    expect(actors.some((span) => span.attributes['bootstate.step'] === 'readyReport' || span.attributes['bootstate.actor'] === 'reportHealth')).toBe(true);
    expect(trace.resource).toMatchObject({
      'service.name': 'bootstate',
      'cloud.provider': 'azure',
      'cloud.platform': 'azure.vm',
      'cloud.region': 'westeurope',
      'host.type': 'Standard_D2ds_v5',
      'host.image.name': 'canonical:ubuntu-24_04-lts:server',
    });
    // The VM id the run went by (the journal is named after it).
    expect(readdirSync(join(run.root, 'var/lib/bootstate/runs'))[0]).toContain(`Z-${trace.resource['host.id']}.jsonl`);
    expect(typeof trace.resource['service.version']).toBe('string');
    expectNoSecret();
  });

  it('a failed boot: the failing invocations carry their HTTP status and attempt, the root the failure, status ERROR', async () => {
    receiver = await startOtlpReceiver();
    fabric.setImds({ status: 500 });
    const run = await exportingRun(receiver.url, { imds: { total_retry_timeout_secs: 1 }, env: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' } });
    expect(run.code).not.toBe(0);
    const { trace, root, states, actors } = oneTrace(run);
    expect(trace.contentType).toMatch(/^application\/json/);
    expect(states.map((span) => span.attributes['bootstate.state'])).toEqual(journalStates(run.root));
    expect(root.status.code).toBe(2);
    expect(root.attributes).toMatchObject({ 'bootstate.result': 'failed', 'error.type': 'TIMEOUT', 'bootstate.error.reason': 'operation timed out' });
    const attempts = actors.filter((span) => span.attributes['bootstate.step'] === 'imds');
    expect(attempts.length).toBeGreaterThan(1);
    expect(attempts.map((span) => span.attributes['bootstate.attempt'])).toEqual(attempts.map((_, index) => index + 1));
    const answered = attempts.filter((span) => span.attributes['bootstate.outcome'] === 'error');
    expect(answered.length).toBeGreaterThan(0);
    for (const span of answered) {
      expect(span.attributes).toMatchObject({ 'http.response.status_code': 500, 'error.type': 'HTTP_STATUS', 'bootstate.error.retryable': true });
      expect(span.status.code).toBe(2);
    }
  });

  it('a pool VM: the pool\'s states, its Ready and every poll of reprovisiondata, then the claimed VM\'s provisioning', async () => {
    receiver = await startOtlpReceiver();
    fabric.setPreprovisioned({ type: 'Running', claimAtPoll: 3 });
    const run = await exportingRun(receiver.url);
    expect(run.code, run.stderr).toBe(0);
    const { states, actors, root } = oneTrace(run);
    const paths = states.map((span) => String(span.attributes['bootstate.state']));
    expect(paths).toEqual(journalStates(run.root));
    expect(paths.some((path) => path.startsWith('preprovisioned'))).toBe(true);
    const polls = actors.filter((span) => span.attributes['bootstate.actor'] === 'pollReprovisionData');
    expect(polls.length).toBeGreaterThanOrEqual(3);
    expect(root.attributes['bootstate.result']).toBe('provisioned');
  });
});

describe('a monitor cycle exported over OTLP/HTTP', () => {
  it('one trace per `monitor --once`: a root for the cycle with its observations, a span per state of the monitor chart', async () => {
    receiver = await startOtlpReceiver();
    const root = mkdtempSync(join(tmpdir(), 'bootstate-otlp-monitor-'));
    const config = join(root, 'bootstate.toml');
    writeFileSync(
      config,
      [
        `[imds]\nendpoint = "${fabric.imdsUrl}"`,
        `[wireserver]\naddress = "127.0.0.1"`,
        `[monitor]\nhealth_service_port = ${new URL(fabric.healthServiceUrl).port}\nhost_plugin_port = ${new URL(fabric.hostPluginUrl).port}\nrequest_timeout_secs = 2`,
        `state_file = "${join(root, 'monitor-state.json')}"`,
        `[hostname_publishing]\nmonitor = false`,
        `[telemetry]\nkvp = false\notlp_endpoint = "${receiver.url}"`,
        `[data_dir]\npath = "${join(root, 'data')}"`,
        `[log_path]\npath = "${join(root, 'bootstate.log')}"`,
      ].join('\n'),
    );
    const cycle = await new Promise<{ code: number | null; stderr: string }>((done) => {
      execFile(process.execPath, [AGENT, 'monitor', '--once', '--config', config], { timeout: 30_000 }, (error, _stdout, stderr) =>
        done({ code: error ? ((error as { code?: number }).code ?? null) : 0, stderr }),
      );
    });
    expect(cycle.code, cycle.stderr).toBe(0);
    expect(receiver.traces).toHaveLength(1);
    const [trace] = receiver.traces;
    const roots = trace!.spans.filter((span) => span.parentSpanId === '');
    expect(roots.map((span) => span.name)).toEqual(['monitor cycle']);
    expect(roots[0]!.attributes).toMatchObject({ 'bootstate.result': 'healthy', 'bootstate.monitor.checks_failed': 0, 'bootstate.monitor.posts_failed': 0 });
    expect(Object.keys(roots[0]!.attributes).some((key) => /^bootstate\.monitor\..+\.ok$/.test(key))).toBe(true);
    expect(trace!.spans.some((span) => 'bootstate.state' in span.attributes && span.parentSpanId === roots[0]!.spanId)).toBe(true);
    expect(trace!.resource['service.name']).toBe('bootstate');
  });
});

describe('a collector in trouble costs one warning, never the run', () => {
  const warnings = (run: AgentRun) => run.stderr.split('\n').filter((line) => line.includes('trace not exported'));

  it('down: the run succeeds and says so once', async () => {
    const run = await exportingRun(await downUrl());
    expect(run.code, run.stderr).toBe(0);
    expect(warnings(run)).toHaveLength(1);
  });

  it('refusing (503): the run succeeds and says so once', async () => {
    receiver = await startOtlpReceiver('refuse');
    const run = await exportingRun(receiver.url);
    expect(run.code, run.stderr).toBe(0);
    expect(warnings(run)).toHaveLength(1);
  });

  it('stalled: the export gives up at its own deadline, the run succeeds and says so once', async () => {
    receiver = await startOtlpReceiver('stall');
    const run = await exportingRun(receiver.url, { env: { OTEL_EXPORTER_OTLP_TIMEOUT: '300' } });
    expect(run.code, run.stderr).toBe(0);
    expect(receiver.headers.length).toBeGreaterThan(0);
    expect(warnings(run)).toHaveLength(1);
    expect(warnings(run)[0]).toContain('within 300 ms');
  });

  it('the config file\'s endpoint, with the headers of OTEL_EXPORTER_OTLP_HEADERS sent and never logged', async () => {
    receiver = await startOtlpReceiver();
    const run = await runAgent(fabric, {
      telemetry: { otlp_endpoint: receiver.url, otlp_protocol: 'http/json' },
      env: { OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${tag}`, BOOTSTATE_LOG: 'debug' },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(receiver.traces).toHaveLength(1);
    expect(receiver.headers[0]!.authorization).toBe(`Bearer ${tag}`);
    expect(run.stderr).toContain('trace exported');
    expect(run.stderr + run.stdout + readFileSync(join(run.root, 'var/log/bootstate.log'), 'utf8')).not.toContain(tag);
  });
});

describe('a default run pays nothing', () => {
  it('the scripts a default run reads hold none of the SDK; the one that does is read only when an endpoint is configured', async () => {
    const dist = resolve('dist');
    for (const script of ['bootstate-provision.bundle.js', 'bootstate-run.bundle.js', 'bootstate.bundle.js', 'bootstate-monitor.bundle.js', 'bootstate-commands.bundle.js']) {
      const text = readFileSync(join(dist, script), 'utf8');
      expect(text).not.toContain('telemetry.sdk.language');
      expect(text).not.toContain('OTEL_EXPORTER_OTLP_TRACES_HEADERS');
    }
    expect(readFileSync(join(dist, 'bootstate-otel.bundle.js'), 'utf8')).toContain('telemetry.sdk.language');
    receiver = await startOtlpReceiver();
    const opened = async (env: Record<string, string>): Promise<string> => {
      const file = join(mkdtempSync(join(tmpdir(), 'bootstate-otlp-')), 'open.trace');
      const run = await runAgent(fabric, { env, command: ['strace', '-f', '-qq', '-e', 'trace=openat', '-o', file, process.execPath, AGENT] });
      expect(run.code, run.stderr).toBe(0);
      return readFileSync(file, 'utf8');
    };
    expect(await opened({})).not.toContain('bootstate-otel.bundle.js');
    expect(receiver.traces).toHaveLength(0);
    const exporting = await opened({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    expect(exporting).toContain('bootstate-otel.bundle.js');
    expect(exporting).not.toContain('bootstate-commands.bundle.js');
    expect(receiver.traces).toHaveLength(1);
  });
});

describe('the export read back by bootstate fleet', () => {
  it('the JSON bodies the agent sent, one per line as a collector file export writes them, give the runs their outcomes, reasons and times', async () => {
    receiver = await startOtlpReceiver();
    const json = { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
    expect((await exportingRun(receiver.url, { env: json })).code).toBe(0);
    fabric.setImds({ status: 500 });
    expect((await exportingRun(receiver.url, { imds: { total_retry_timeout_secs: 1 }, env: json })).code).not.toBe(0);
    expect(receiver.bodies).toHaveLength(2);
    const file = join(mkdtempSync(join(tmpdir(), 'bootstate-otlp-fleet-')), 'traces.jsonl');
    writeFileSync(file, receiver.bodies.map((body) => JSON.stringify(JSON.parse(body.toString('utf8')))).join('\n') + '\n');
    const { stdout } = await promisify(execFile)(process.execPath, [AGENT, 'fleet', '--json', file]);
    const summary = JSON.parse(stdout) as Record<string, any>;
    expect(summary.runs).toBe(2);
    expect(summary.unreadable).toEqual([]);
    expect(Object.fromEntries((summary.outcomes as Array<{ key: string; count: number }>).map((o) => [o.key, o.count]))).toEqual({ provisioned: 1, failed: 1 });
    expect((summary.reasons as Array<{ key: string; count: number }>).map((r) => [r.key, r.count])).toEqual([['operation timed out', 1]]);
    expect(summary.times.ready.p50).toBeGreaterThan(0);
    expect(summary.times.accepted.p50).toBeGreaterThan(0);
  });
});
