/**
 * The run's trace as recorded from a chart's inspection events (src/observe/run-trace.ts) and where it goes
 * (src/observe/otlp-settings.ts): states nested and in order, invocations under the state that invoked them with their
 * attempt and outcome, failures by their allow-listed parts only; the endpoint, protocol and deadline from the
 * config and the standard environment variables. The attribute names are the semantic conventions' where they exist.
 */
import { ATTR_ERROR_TYPE, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import {
  ATTR_CLOUD_PLATFORM,
  ATTR_CLOUD_PROVIDER,
  ATTR_CLOUD_REGION,
  ATTR_HOST_ID,
  ATTR_HOST_IMAGE_NAME,
  ATTR_HOST_IMAGE_VERSION,
  ATTR_HOST_TYPE,
  CLOUD_PLATFORM_VALUE_AZURE_VM,
  CLOUD_PROVIDER_VALUE_AZURE,
} from '@opentelemetry/semantic-conventions/incubating';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assign, createActor, fromPromise, setup, toPromise } from 'xstate';
import { BootstateError } from '../../src/core/errors.js';
import { otlpSettings, shownUrl, tracesUrl, type OtlpConfig } from '../../src/observe/otlp-settings.js';
import { ATTR, LOOP_SPANS, RunTrace, type SpanRecord } from '../../src/observe/run-trace.js';
import { runResource } from '../../src/observe/trace-export.js';

const SECRET = 'hunter2-canary';

/** A small chart: a retry loop whose first attempt fails with a 503 (its body carrying a secret), then a step. */
function chart(failures: number) {
  let calls = 0;
  return setup({
    actors: {
      fetch: fromPromise(async () => {
        calls += 1;
        if (calls <= failures) throw new BootstateError('HTTP_STATUS', `503 ${SECRET}`, { data: [['status', '503'], ['body', SECRET]], retryable: true });
        return { password: SECRET };
      }),
      step: fromPromise(async () => SECRET),
    },
  }).createMachine({
    id: 'mini',
    context: { secret: SECRET, tries: 0 },
    initial: 'gathering',
    states: {
      gathering: {
        initial: 'requesting',
        states: {
          requesting: {
            invoke: {
              id: 'imds',
              src: 'fetch',
              onDone: { target: '#mini.configuring' },
              onError: [{ guard: ({ context }) => context.tries < 5, target: 'backoff', actions: assign({ tries: ({ context }) => context.tries + 1 }) }, { target: '#mini.failed' }],
            },
          },
          backoff: { after: { 1: 'requesting' } },
        },
      },
      configuring: { invoke: { id: 'hostname', src: 'step', onDone: 'done' } },
      done: { type: 'final' },
      failed: { type: 'final' },
    },
    output: () => ({ result: 'provisioned', exitCode: 0 }),
  });
}

async function record(failures: number): Promise<SpanRecord[]> {
  let clock = 0;
  const trace = new RunTrace('provision', () => ++clock);
  const actor = createActor(chart(failures), { inspect: (event) => trace.inspect(event) });
  actor.start();
  const output = await toPromise(actor);
  return trace.finish(output);
}

describe('RunTrace', () => {
  it('records a root, the states nested and in order, each invocation under its state with its attempt and outcome', async () => {
    const spans = await record(2);
    const names = spans.map((span) => span.name);
    expect(names[0]).toBe('provision');
    expect(spans.filter((span) => span.kind === 'state').map((span) => span.name)).toEqual([
      'gathering', 'gathering.requesting', 'gathering.backoff', 'gathering.requesting', 'gathering.backoff', 'gathering.requesting', 'configuring', 'done',
    ]);
    for (const span of spans) {
      expect(span.end).not.toBeNull();
      expect(span.end!).toBeGreaterThanOrEqual(span.start);
      if (span.parent !== null) expect(span.parent).toBeLessThan(span.id);
    }
    const byId = new Map(spans.map((span) => [span.id, span]));
    const imds = spans.filter((span) => span.name === 'invoke imds');
    expect(imds.map((span) => span.attributes[ATTR.attempt])).toEqual([1, 2, 3]);
    expect(imds.map((span) => span.attributes[ATTR.outcome])).toEqual(['error', 'error', 'done']);
    for (const span of imds) expect(byId.get(span.parent!)?.name).toBe('gathering.requesting');
    expect(imds[0]!.attributes).toMatchObject({ [ATTR.step]: 'imds', [ATTR.actor]: 'fetch', [ATTR.httpStatus]: 503, [ATTR.errorType]: 'HTTP_STATUS', [ATTR.reason]: 'http status error', [ATTR.retryable]: true });
    expect(imds[0]!.error).toBe('http status error');
    expect(byId.get(spans.find((span) => span.name === 'gathering.requesting')!.parent!)?.name).toBe('gathering');
    expect(spans[0]!.attributes).toMatchObject({ [ATTR.result]: 'provisioned', [ATTR.exitCode]: 0 });
  });

  it('carries no context value, event payload or error message', async () => {
    expect(JSON.stringify(await record(3))).not.toContain(SECRET);
  });

  it('ends an invocation its state left before it answered as stopped', () => {
    const trace = new RunTrace('provision');
    const machine = setup({ actors: { forever: fromPromise(() => new Promise<never>(() => {})) } }).createMachine({
      initial: 'waiting',
      states: { waiting: { invoke: { id: 'wait', src: 'forever' }, on: { GO: 'gone' } }, gone: { type: 'final' } },
    });
    const actor = createActor(machine, { inspect: (event) => trace.inspect(event) }).start();
    actor.send({ type: 'GO' });
    const spans = trace.finish();
    expect(spans.find((span) => span.name === 'invoke wait')?.attributes[ATTR.outcome]).toBe('stopped');
    expect(spans.find((span) => span.name === 'waiting')?.attributes[ATTR.leftBy]).toBe('GO');
  });
});

describe('RunTrace over a long wait', () => {
  it('keeps a loop of thousands of attempts (a pool VM polling for days) to its first ones and its last, saying how many it folded', async () => {
    const POLLS = 3000;
    let calls = 0;
    const machine = setup({
      actors: {
        poll: fromPromise(async () => {
          calls += 1;
          if (calls < POLLS) throw new BootstateError('HTTP_STATUS', 'not yet', { data: [['status', '404']], retryable: true });
        }),
      },
    }).createMachine({
      id: 'pool',
      initial: 'waiting',
      states: {
        waiting: {
          initial: 'requesting',
          states: {
            requesting: { invoke: { id: 'reprovision', src: 'poll', onDone: '#pool.claimed', onError: 'backoff' } },
            backoff: { after: { 1000: 'requesting' } },
          },
        },
        claimed: { type: 'final' },
      },
    });
    let now = 0;
    const trace = new RunTrace('provision', () => ++now);
    // The backoff's timer fires at once: the loop runs as fast as the promises settle.
    const clock = { setTimeout: (fn: () => void) => setImmediate(fn), clearTimeout: (id: unknown) => clearImmediate(id as NodeJS.Immediate) };
    const actor = createActor(machine, { clock: clock as never, inspect: (event) => trace.inspect(event) }).start();
    await toPromise(actor);
    const spans = trace.finish();
    expect(calls).toBe(POLLS);
    expect(spans.length).toBeLessThan(400);
    const polls = spans.filter((span) => span.name === 'invoke reprovision');
    expect(polls.at(-1)!.attributes).toMatchObject({ [ATTR.attempt]: POLLS, [ATTR.outcome]: 'done' });
    expect(polls.slice(0, 3).map((span) => span.attributes[ATTR.attempt])).toEqual([1, 2, 3]);
    const requesting = spans.filter((span) => span.name === 'waiting.requesting');
    expect(requesting).toHaveLength(LOOP_SPANS + 1);
    expect(requesting.at(-1)!.attributes[ATTR.folded]).toBe(POLLS - LOOP_SPANS - 1);
    // The folded entries' time is kept: with every entry's own, it adds up to the loop's whole time.
    const waiting = spans.find((span) => span.name === 'waiting')!;
    const inLoop = spans.filter((span) => span.parent === waiting.id);
    const told = inLoop.reduce((sum, span) => sum + (span.end! - span.start) + Number(span.attributes[ATTR.foldedMs] ?? 0), 0);
    const gaps = inLoop.length + Number(requesting.at(-1)!.attributes[ATTR.folded]) + Number(inLoop.filter((x) => x.name === 'waiting.backoff').at(-1)!.attributes[ATTR.folded]);
    expect(told).toBeGreaterThan(0);
    expect(told).toBeLessThanOrEqual(waiting.end! - waiting.start);
    expect(told).toBeGreaterThan((waiting.end! - waiting.start) / 2);
    expect(gaps).toBe(2 * POLLS - 1);
    expect(polls.at(-1)!.parent).toBe(requesting.at(-1)!.id);
    const ids = new Set<number>();
    for (const span of spans) {
      if (span.parent !== null) expect(ids.has(span.parent), `${span.name}'s parent is recorded before it`).toBe(true);
      ids.add(span.id);
    }
    expect(spans.some((span) => span.name === 'claimed')).toBe(true);
  });
});

describe('the resource and attribute names', () => {
  it('are the semantic conventions\' where they exist', () => {
    const resource = runResource('vm-1', { location: 'eastus', vmSize: 'Standard_B1s', imageName: 'p:o:s', imageVersion: '1.2.3' });
    expect(resource).toMatchObject({
      [ATTR_SERVICE_NAME]: 'bootstate',
      [ATTR_CLOUD_PROVIDER]: CLOUD_PROVIDER_VALUE_AZURE,
      [ATTR_CLOUD_PLATFORM]: CLOUD_PLATFORM_VALUE_AZURE_VM,
      [ATTR_CLOUD_REGION]: 'eastus',
      [ATTR_HOST_ID]: 'vm-1',
      [ATTR_HOST_TYPE]: 'Standard_B1s',
      [ATTR_HOST_IMAGE_NAME]: 'p:o:s',
      [ATTR_HOST_IMAGE_VERSION]: '1.2.3',
    });
    expect(typeof resource[ATTR_SERVICE_VERSION]).toBe('string');
    expect([ATTR.errorType, ATTR.httpStatus]).toEqual([ATTR_ERROR_TYPE, ATTR_HTTP_RESPONSE_STATUS_CODE]);
  });
});

describe('otlpSettings', () => {
  const config: OtlpConfig = { otlp_endpoint: '', otlp_protocol: 'http/protobuf', otlp_timeout_secs: 2, otlp_monitor: true };

  it('is off with no endpoint anywhere, or the SDK disabled', () => {
    expect(otlpSettings(config, {})).toBeNull();
    expect(otlpSettings({ ...config, otlp_endpoint: 'http://c:4318' }, { OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(otlpSettings(config, { OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toBeNull();
  });

  it('takes the traces endpoint as it is, a base endpoint with v1/traces, the environment over the file', () => {
    expect(otlpSettings({ ...config, otlp_endpoint: 'http://file:4318/' }, {})).toEqual({ url: 'http://file:4318/v1/traces', timeoutMs: 2000, protocol: 'http/protobuf' });
    expect(otlpSettings({ ...config, otlp_endpoint: 'http://file:4318' }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://env:4318/otlp' })?.url).toBe('https://env:4318/otlp/v1/traces');
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces/x', OTEL_EXPORTER_OTLP_TIMEOUT: '500', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
    expect(otlpSettings(config, env)).toEqual({ url: 'http://traces/x', timeoutMs: 500, protocol: 'http/json' });
    expect(otlpSettings(config, { ...env, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '750', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual({ url: 'http://traces/x', timeoutMs: 750, protocol: 'http/protobuf' });
  });

  it('names a URL without its user name, password or query', () => {
    expect(shownUrl('https://user:pass@collector:4318/v1/traces?key=secret')).toBe('https://collector:4318/v1/traces');
    const credentials = fc.tuple(fc.webUrl({ withQueryParameters: true, withFragments: true }), fc.webSegment(), fc.webSegment());
    fc.assert(
      fc.property(credentials, ([url, user, password]) => {
        const withUser = new URL(url);
        withUser.username = `u${user}`;
        withUser.password = `p${password}`;
        const shown = new URL(shownUrl(withUser.href));
        return shown.username === '' && shown.password === '' && shown.search === '' && shown.hash === '' && shown.host === withUser.host;
      }),
    );
    fc.assert(fc.property(fc.webUrl(), (url) => tracesUrl(url).endsWith('/v1/traces') && !tracesUrl(url).endsWith('//v1/traces')));
  });
});
