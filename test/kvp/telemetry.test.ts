import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RECORD_BYTES, encodeRecords } from '../../src/kvp/codec.js';
import { lockFd } from '../../src/system/flock.js';
import { KvpStore } from '../../src/kvp/store.js';
import { pinoDestination } from '../../src/kvp/log-sink.js';
import { ZERO_VM_ID } from '../../src/core/metadata.js';
import { KvpTelemetry } from '../../src/kvp/telemetry.js';
import { VERSION } from '../../src/core/version.js';
import { STATE } from '../support/chart.js';
import { rawRecords, tempDir } from './helpers.js';

let dir: string;
let cleanup: () => void;
beforeEach(() => ({ dir, cleanup } = tempDir()));
afterEach(() => cleanup());

const VM = 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8';
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;
const make = (options: ConstructorParameters<typeof KvpTelemetry>[0] = {}) =>
  new KvpTelemetry({ config: { kvp_dir: dir }, bootTime: null, ...options });
const pool = () => rawRecords(path.join(dir, '.kvp_pool_1'));

describe('KvpTelemetry', () => {
  it('writes a state span keyed bootstate-<version>|<vm_id>|<LEVEL>|<state path>|<uuid> with start, end and result', () => {
    const t = make({ vmId: VM });
    t.stateSpan(STATE.imdsFetching, {
      start: new Date('2025-08-11T18:45:40.010Z'), end: new Date('2025-08-11T18:45:41.123Z'), result: 'xstate.done.actor.imds',
    });
    expect(t.flush()).toBe(true);
    const [record] = pool();
    const [prefix, vm, level, name, id] = record.key.split('|');
    expect([prefix, vm, level, name]).toEqual([`bootstate-${VERSION}`, VM, 'INFO', STATE.imdsFetching]);
    expect(id).toMatch(UUID);
    expect(record.value).toBe('Start: 2025-08-11T18:45:40.010Z | End: 2025-08-11T18:45:41.123Z | Result: xstate.done.actor.imds');
  });

  it('writes events as Time: <iso> | Event: <message>', () => {
    const t = make({ vmId: VM });
    t.event('WARN', 'provisioning.report', 'wireserver returned 503', new Date('2025-08-11T18:45:41.5Z'));
    t.flush();
    expect(pool()[0].value).toBe('Time: 2025-08-11T18:45:41.500Z | Event: wireserver returned 503');
    expect(pool()[0].key).toContain('|WARN|provisioning.report|');
  });

  it('queues records until a flush, then writes the whole batch under one lock', () => {
    const t = make({ batchSize: 100 });
    for (let i = 0; i < 10; i++) t.event('INFO', 's', `e${i}`);
    expect(t.pending).toBe(10);
    expect(fs.existsSync(path.join(dir, '.kvp_pool_1'))).toBe(false);
    t.flush();
    expect(pool().map((r) => r.value.split('Event: ')[1])).toEqual(Array.from({ length: 10 }, (_, i) => `e${i}`));
    expect(t.stats.written).toBe(10);
  });

  it('flushes by itself when a batch is full', () => {
    const t = make({ batchSize: 5 });
    for (let i = 0; i < 12; i++) t.event('INFO', 's', `e${i}`);
    expect(pool()).toHaveLength(10);
    expect(t.pending).toBe(2);
  });

  it('keys records with the VM id known at flush time: queued records are re-keyed, flushed ones keep the zero GUID', () => {
    const t = make();
    t.event('INFO', 'early', 'flushed before the id is known');
    t.flush();
    t.event('INFO', 'queued', 'queued before the id is known');
    t.setVmId(VM);
    t.flush();
    expect(pool().map((r) => r.key.split('|')[1])).toEqual([ZERO_VM_ID, VM]);
  });

  it('splits long values into chunks of at most 1,022 bytes under the same key, and caps the number of chunks', () => {
    const t = make({ maxChunks: 3 });
    t.event('ERROR', 's', '€'.repeat(600));
    t.event('ERROR', 's', 'x'.repeat(10_000));
    t.flush();
    const records = pool();
    const first = records.filter((r) => r.key === records[0].key);
    expect(first.length).toBe(2);
    expect(first.map((r) => r.value).join('')).toMatch(new RegExp(`^Time: \\S+Z \\| Event: ${'€'.repeat(600)}$`));
    const second = records.filter((r) => r.key !== records[0].key);
    expect(second).toHaveLength(3);
    expect(second[2].value.endsWith('…[truncated]')).toBe(true);
    for (const r of records) expect(Buffer.byteLength(r.value)).toBeLessThanOrEqual(1022);
  });

  it('filters records below the configured level', () => {
    const t = make({ config: { kvp_dir: dir, kvp_level: 'warn' } });
    t.event('INFO', 's', 'dropped');
    t.stateSpan('s', { start: new Date(), end: new Date(), result: 'ok' });
    t.event('ERROR', 's', 'kept');
    t.flush();
    expect(pool()).toHaveLength(1);
    expect(t.stats.filtered).toBe(2);
  });

  it('makes untrusted names and messages storable: no separator or control characters in the name, no NUL anywhere', () => {
    const t = make({ vmId: VM });
    t.event('WARN', 'a|b\nc', 'nul\0here');
    t.event('WARN', 'n'.repeat(400), 'long name');
    t.flush();
    const [first, second] = pool();
    expect(first.key.split('|')).toHaveLength(5);
    expect(first.key).toContain('|a_b_c|');
    expect(first.value).toContain('nul\\0here');
    expect(Buffer.byteLength(second.key)).toBeLessThanOrEqual(254);
    expect(second.key).toMatch(UUID);
  });

  it('writes the provisioning report at once, replacing the previous one, after the queued telemetry', () => {
    const t = make({ vmId: VM });
    t.event('INFO', 's', 'before');
    expect(t.writeReport('result=error|reason=http status error')).toBe(true);
    expect(t.writeReport('result=success|agent=bootstate/0.1.0')).toBe(true);
    const records = pool();
    expect(records).toHaveLength(2);
    expect(records[1]).toEqual({ key: 'PROVISIONING_REPORT', value: 'result=success|agent=bootstate/0.1.0' });
  });

  it('cuts an oversize report to 1,022 bytes at a character boundary instead of losing it', () => {
    const t = make();
    t.writeReport(`result=error|${'€'.repeat(400)}`);
    const report = new KvpStore({ dir }).read('PROVISIONING_REPORT')!;
    expect(Buffer.byteLength(report)).toBeLessThanOrEqual(1022);
    expect(report.startsWith('result=error|€')).toBe(true);
  });

  it('never throws: a pool it cannot write is counted and remembered in lastError', () => {
    fs.writeFileSync(path.join(dir, 'blocker'), '');
    const t = new KvpTelemetry({ dir: path.join(dir, 'blocker'), bootTime: null });
    t.event('ERROR', 's', 'x');
    expect(t.flush()).toBe(false);
    expect(t.writeReport('result=error')).toBe(false);
    expect(t.stats.errors).toBe(2);
    expect(t.stats.dropped).toBe(1);
    expect(t.lastError).toMatch(/kvp pool/);
  });

  it('keeps the batch queued while another writer holds the lock, stops auto-flushing, and writes it all on the next flush', () => {
    const store = new KvpStore({ dir, timeoutMs: 0 });
    const t = make({ store, batchSize: 50 });
    t.event('ERROR', 's', 'x');
    const holder = fs.openSync(store.path, fs.constants.O_RDWR | fs.constants.O_CREAT);
    lockFd(holder, 'exclusive');
    expect(t.flush()).toBe(false);
    expect(t.pending).toBe(1);
    for (let i = 0; i < 60; i++) t.event('ERROR', 's', `queued ${i}`);
    expect(t.stats.errors).toBe(1);
    expect(t.pending).toBe(61);
    fs.closeSync(holder);
    expect(t.flush()).toBe(true);
    expect(pool()).toHaveLength(61);
  });

  it('counts telemetry that no longer fits a full pool as dropped', () => {
    fs.writeFileSync(path.join(dir, '.kvp_pool_1'), encodeRecords(Array.from({ length: 1023 }, (_, i) => ({ key: `k${i}`, value: 'v' }))));
    const t = make();
    t.event('INFO', 's', 'a');
    t.event('INFO', 's', 'b');
    t.flush();
    expect(t.stats).toMatchObject({ written: 1, dropped: 1 });
  });

  it('empties a pool left from an earlier boot under the lock of its first write, and leaves a fresh one alone', () => {
    const file = path.join(dir, '.kvp_pool_1');
    fs.writeFileSync(file, encodeRecords([{ key: 'old', value: 'boot' }]));
    const fresh = new KvpTelemetry({ dir, bootTime: new Date(0) });
    expect(fresh.writeReport('result=success')).toBe(true);
    expect(fresh.clearedStale).toBe(false);
    expect(new KvpStore({ path: file }).dump().map((r) => r.key)).toEqual(['old', 'PROVISIONING_REPORT']);

    fs.writeFileSync(file, encodeRecords([{ key: 'old', value: 'boot' }]));
    const stale = new KvpTelemetry({ dir, bootTime: new Date(Date.now() + 60_000) });
    expect(fs.statSync(file).size).toBe(RECORD_BYTES);
    expect(stale.writeReport('result=success')).toBe(true);
    expect(stale.clearedStale).toBe(true);
    expect(new KvpStore({ path: file }).dump().map((r) => r.key)).toEqual(['PROVISIONING_REPORT']);
  });

  it('does nothing at all when kvp is disabled in the config', () => {
    const t = make({ config: { kvp: false, kvp_dir: dir } });
    t.event('ERROR', 's', 'x');
    expect(t.writeReport('r')).toBe(false);
    expect(t.flush()).toBe(true);
    expect(fs.existsSync(path.join(dir, '.kvp_pool_1'))).toBe(false);
  });
});

describe('pinoDestination', () => {
  it('turns warnings and errors from a real pino logger into events, copying only allow-listed fields', () => {
    const t = make({ vmId: VM });
    const log = pino({ level: 'trace' }, pinoDestination(t));
    log.info({ state: 'x' }, 'info is below warn');
    log.warn({ state: 'provisioning.report', status: 503, endpoint: 'http://168.63.129.16/provisioning/health', password: 'hunter2', body: { adminPassword: 'p' } }, 'report rejected');
    log.error({ code: 'USER_FAILED', reason: 'failed to provision user', err: new Error('useradd -p secret') }, 'user failed');
    t.flush();
    const records = pool();
    expect(records).toHaveLength(2);
    expect(records[0].key).toContain('|WARN|provisioning.report|');
    expect(records[0].value).toMatch(/\| Event: report rejected; state=provisioning\.report, status=503, endpoint=http:\/\/168\.63\.129\.16\/provisioning\/health$/);
    expect(records[1].key).toContain('|ERROR|log|');
    expect(records[1].value).toMatch(/Event: user failed; reason=failed to provision user, code=USER_FAILED$/);
    const everything = JSON.stringify(records);
    for (const secret of ['hunter2', 'adminPassword', 'secret', 'body', 'err']) expect(everything).not.toContain(secret);
  });

  it('uses the log line time, maps fatal to ERROR, and honours a telemetry level above warn', () => {
    const t = make({ config: { kvp_dir: dir, kvp_level: 'error' } });
    const dest = pinoDestination(t);
    dest.write(`${JSON.stringify({ level: 40, time: Date.parse('2025-01-01T00:00:00Z'), msg: 'warn' })}\n`);
    dest.write(`${JSON.stringify({ level: 60, time: Date.parse('2025-01-01T00:00:01Z'), msg: 'fatal' })}\n`);
    dest.write('not json\n');
    t.flush();
    expect(pool()).toHaveLength(1);
    expect(pool()[0].value).toBe('Time: 2025-01-01T00:00:01.000Z | Event: fatal');
    expect(pool()[0].key).toContain('|ERROR|');
  });
});
