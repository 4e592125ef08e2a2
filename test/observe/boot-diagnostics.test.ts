/**
 * The boot diagnostics writer (src/observe/boot-diagnostics.ts), the kernel log reader and the secret scrubber:
 * what lands in a pool on a failure and on Ready, that the pool is never overfilled and what a full one gets, and
 * that secrets planted in a failed command's stderr and in the kernel log are in no record, decoded or not.
 */
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';
import { cutLine, kmsgEscaped, REDACTED, scrubData, SecretScrubber, SecretStore } from '../../src/core/secrets.js';
import { EncodedReports } from '../../src/provision/encoded-reports.js';
import { MAX_RECORDS, SAFE_KEY_BYTES, SAFE_VALUE_BYTES } from '../../src/kvp/codec.js';
import { packText, unpackDiagnostics } from '../../src/kvp/diagnostics.js';
import { KvpStore } from '../../src/kvp/store.js';
import { BootDiagnostics, managerTimestamps, stepText } from '../../src/observe/boot-diagnostics.js';
import { formatKmsgRecord, readKernelLogTail } from '../../src/observe/kernel-log.js';
import { printDiagnostics } from '../../src/commands/kvp-diagnostics.js';
import type { RunResult } from '../../src/system/exec.js';

const VM = '2b9bd8d1-0c7e-4a2d-9bd3-05bd8d2b9f4a';
const PASSWORD = 'Pa55-Canary-7e3f19a2';
const CUSTOM = 'custom-data-canary-line-0451\n#!/bin/sh\necho second-canary-line-99';

function dir(): string {
  return mkdtempSync(path.join(tmpdir(), 'bootstate-diag-'));
}

function secrets(): SecretStore {
  const store = new SecretStore();
  store.setPassword(PASSWORD);
  store.set('customData', Buffer.from(CUSTOM));
  return store;
}

/** A kernel log file of `lines` lines, the password on one of them. */
function kernelLog(root: string, lines = 2000): string {
  const file = path.join(root, 'kmsg.txt');
  const text = Array.from({ length: lines }, (_, i) => `[${(i / 100).toFixed(6)}] hv_vmbus: line ${i} ${i === lines - 5 ? `login with ${PASSWORD}` : ''}`);
  writeFileSync(file, `${text.join('\n')}\n`);
  return file;
}

const failed = new BootstateError('SUBPROCESS_FAILED', 'useradd: exited 1', {
  data: [['command', 'useradd -m azureuser'], ['exit_status', '1'], ['stderr', `${PASSWORD.slice(5)} useradd: bad password ${PASSWORD}\nsecond-canary-line-99 and ${Buffer.from(CUSTOM).toString('base64')}`]],
}).toFailure();

function diagnostics(kernel: string, settings: Partial<typeof DEFAULT_CONFIG.boot_diagnostics> = {}): BootDiagnostics {
  return new BootDiagnostics({ ...DEFAULT_CONFIG.boot_diagnostics, kernel_log: kernel, ...settings }, { underSystemd: false });
}

function noSecretIn(texts: string[]): void {
  for (const text of texts) for (const needle of [PASSWORD, PASSWORD.slice(5), 'custom-data-canary', 'second-canary-line', Buffer.from(CUSTOM).toString('base64').slice(0, 12)]) expect(text).not.toContain(needle);
}

describe('BootDiagnostics.write', () => {
  it('writes, on a failure, the timeline, the step and the kernel log tail within the limits, with no secret in any record', async () => {
    const root = dir();
    const store = new KvpStore({ path: path.join(root, 'pool') });
    const d = diagnostics(kernelLog(root));
    d.noteReady();
    const scrubber = secrets().scrubber();
    const written = await d.write(store, { vmId: VM, result: 'failed', failure: failed }, scrubber);
    const records = store.dump();
    expect(written.records).toBe(records.length);
    for (const r of records) {
      expect(Buffer.byteLength(r.key)).toBeLessThanOrEqual(SAFE_KEY_BYTES);
      expect(Buffer.byteLength(r.value)).toBeLessThanOrEqual(SAFE_VALUE_BYTES);
    }
    const { timelines, texts } = unpackDiagnostics(records);
    expect(timelines).toHaveLength(1);
    const fields = Object.fromEntries(timelines[0]!.fields);
    expect(fields).toMatchObject({ result: 'failed', systemd: 'not under systemd' });
    expect(Number(fields.ready1_ms)).toBeGreaterThanOrEqual(Number(fields.unit_start_ms));
    expect(texts.map((t) => t.name).sort()).toEqual(['kernel-log', 'step']);
    const step = texts.find((t) => t.name === 'step')!.bytes!.toString();
    expect(step).toContain('code: SUBPROCESS_FAILED');
    expect(step).toContain('command: useradd -m azureuser');
    expect(step).toContain(`${REDACTED} useradd: bad password ${REDACTED}`);
    const kernel = texts.find((t) => t.name === 'kernel-log')!.bytes!.toString();
    expect(kernel).toContain('hv_vmbus: line 1999');
    expect(kernel).toContain(`login with ${REDACTED}`);
    noSecretIn([...records.map((r) => `${r.key}=${r.value}`), step, kernel]);
  });

  it('writes only the timeline on Ready without on_ready, and the kernel log with it', async () => {
    const root = dir();
    const store = new KvpStore({ path: path.join(root, 'pool') });
    await diagnostics(kernelLog(root), { on_ready: false }).write(store, { vmId: VM, result: 'provisioned' }, new SecretScrubber([]));
    expect(store.dump()).toHaveLength(1);
    expect(unpackDiagnostics(store.dump()).timelines[0]!.fields).toContainEqual(['kernel_log', 'off']);
    await diagnostics(kernelLog(root)).write(store, { vmId: VM, result: 'provisioned' }, new SecretScrubber([]));
    expect(unpackDiagnostics(store.dump()).texts.map((t) => t.name)).toEqual(['kernel-log']);
  });

  it('never takes the pool past 1,024 minus leave_free: a nearly full pool gets a cut kernel log that says so, a full one nothing', async () => {
    const root = dir();
    const store = new KvpStore({ path: path.join(root, 'pool') });
    const noisy = path.join(root, 'noisy');
    writeFileSync(noisy, Array.from({ length: 40_000 }, (_, i) => `[${i}] ${(i * 2654435761 % 4294967296).toString(36)} ${Math.random()}`).join('\n'));
    store.append(Array.from({ length: MAX_RECORDS - 64 - 6 }, (_, i) => ({ key: `other-${i}`, value: 'x' })));
    const written = await diagnostics(noisy).write(store, { vmId: VM, result: 'failed', failure: failed }, new SecretScrubber([]));
    expect(store.dump()).toHaveLength(MAX_RECORDS - 64);
    expect(written.note).toMatch(/cut to the pool's room \(6 records\)/);
    const { texts, timelines } = unpackDiagnostics(store.dump());
    expect(texts.every((t) => t.problem === undefined)).toBe(true);
    expect(texts.find((t) => t.name === 'kernel-log')!.bytes!.toString()).toMatch(/^\[\d+ earlier bytes left out: the KVP pool had room for \d+ records\]\n/);
    expect(timelines[0]!.fields.find(([k]) => k === 'kernel_log')![1]).toMatch(/^\d+ cut$/);
    const full = await diagnostics(noisy).write(store, { vmId: VM, result: 'failed', failure: failed }, new SecretScrubber([]));
    expect(full).toMatchObject({ records: 0, note: 'no room in the pool: nothing written' });
    expect(store.dump()).toHaveLength(MAX_RECORDS - 64);
  });

  it('says the kernel log is unreadable rather than failing', async () => {
    const root = dir();
    const store = new KvpStore({ path: path.join(root, 'pool') });
    await diagnostics(path.join(root, 'absent')).write(store, { vmId: VM, result: 'failed', failure: failed }, new SecretScrubber([]));
    expect(unpackDiagnostics(store.dump()).timelines[0]!.fields).toContainEqual(['kernel_log', 'unreadable ENOENT']);
  });

  it('is printed by `bootstate kvp diag` as a timeline, the step and the kernel log; a missing part is said, exit 1', async () => {
    const root = dir();
    const store = new KvpStore({ path: path.join(root, 'pool') });
    await diagnostics(kernelLog(root)).write(store, { vmId: VM, result: 'failed', failure: failed }, secrets().scrubber());
    let out = '';
    let err = '';
    const io = { stdout: (t: string) => void (out += t), stderr: (t: string) => void (err += t) };
    expect(printDiagnostics(store.dump(), { io, json: false, print: () => undefined })).toBe(0);
    expect(out).toMatch(new RegExp(`^VM ${VM}, run [0-9a-f]{8}\n  timeline`));
    expect(out).toMatch(/bootstate started +\d+\.\d ms/);
    expect(out).toContain('    code: SUBPROCESS_FAILED');
    expect(out).toContain('hv_vmbus: line 1999');
    const records = store.dump();
    const part = records.findIndex((r) => r.key.includes('|kernel-log|2/'));
    out = '';
    expect(printDiagnostics(records.filter((_, i) => i !== part), { io, json: false, print: () => undefined })).toBe(1);
    expect(out).toMatch(/kernel-log: cannot be read: 1 of \d+ parts missing \(2\)/);
    expect(printDiagnostics([], { io, json: false, print: () => undefined })).toBe(1);
    expect(err).toContain('no boot diagnostics in the pool');
  });
});

describe('`bootstate kvp diag` on a pool from elsewhere (a disk under investigation)', () => {
  it('prints no terminal control from any key or value: field names, text names and texts escaped, C1 controls too', () => {
    const esc = '\u001b]0;owned\u0007\u009b2J';
    const records = [
      { key: `bootstate-boot|${VM}|r1`, value: `result=failed|na${esc}me=1` },
      ...packText({ vmId: VM, run: 'r1' }, 'step', Buffer.from(`code: X\nstderr: ${esc}\n`))!,
      { key: `bootstate-diag|${VM}|r1|bad${esc}|1/2`, value: 'AAAA' },
    ];
    let out = '';
    const io = { stdout: (t: string) => void (out += t), stderr: (t: string) => void (out += t) };
    printDiagnostics(records, { io, json: false, print: () => undefined });
    expect(out).toContain('stderr: \\x1b]0;owned');
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
  });
});

describe('managerTimestamps', () => {
  it('turns systemctl show lines into milliseconds, and a failure into one field', async () => {
    const result = (stdout: string, exitCode = 0): RunResult => ({ argv: [], exitCode, signal: null, stdout, stderr: '', endedBy: 'exit' });
    const out = 'FirmwareTimestampMonotonic=0\nLoaderTimestampMonotonic=0\nInitRDTimestampMonotonic=812345\nUserspaceTimestampMonotonic=2100000\n';
    expect(await managerTimestamps(async () => result(out))).toEqual([['firmware_ms', '0.0'], ['loader_ms', '0.0'], ['initrd_ms', '812.3'], ['userspace_ms', '2100.0']]);
    expect(await managerTimestamps(async () => result('', 1))).toEqual([['systemd', 'systemctl exited 1']]);
  });
});

describe('the kernel log reader', () => {
  it('formats /dev/kmsg records as dmesg does and keeps the newest whole lines of a file', () => {
    expect(formatKmsgRecord('6,339,5140900,-;NET: Registered protocol family 10\n SUBSYSTEM=net')).toBe('[    5.140900] NET: Registered protocol family 10');
    const root = dir();
    const tail = readKernelLogTail(kernelLog(root, 100), 500);
    expect('text' in tail && tail.cut).toBe(true);
    const text = 'text' in tail ? tail.text.toString() : '';
    expect(text.length).toBeLessThanOrEqual(500);
    expect(text).toMatch(/^\[/);
    expect(text).toMatch(/line 99 \n$/);
  });
});

describe('a secret in /dev/kmsg', () => {
  it('is scrubbed in the form the kernel escapes it to (a backslash and every byte past ASCII as \\xNN)', async () => {
    // A password of the kind Azure accepts, with a backslash and a character past ASCII, as /dev/kmsg prints it.
    const password = 'Pa\\55-Ca\u00e9ary-7e3f19a2';
    const escaped = [...Buffer.from(password)].map((b) => (b < 0x20 || b >= 0x7f || b === 0x5c ? `\\x${b.toString(16).padStart(2, '0')}` : String.fromCharCode(b))).join('');
    expect(escaped).toBe('Pa\\x5c55-Ca\\xc3\\xa9ary-7e3f19a2');
    const root = dir();
    // A FIFO stands in for /dev/kmsg: not a regular file, so it is read record by record until EAGAIN.
    const fifo = path.join(root, 'kmsg');
    execFileSync('mkfifo', [fifo]);
    const writer = openSync(fifo, constants.O_RDWR);
    try {
      writeSync(writer, `4,812,9123456,-;audit: login failed for password ${escaped}\n`);
      const store = new KvpStore({ path: path.join(root, 'pool') });
      const scrubber = new SecretStore();
      scrubber.setPassword(password);
      await diagnostics(fifo).write(store, { vmId: VM, result: 'failed', failure: failed }, scrubber.scrubber());
      const kernel = unpackDiagnostics(store.dump()).texts.find((t) => t.name === 'kernel-log')!.bytes!.toString();
      expect(kernel).toContain('audit: login failed for password');
      expect(kernel).not.toContain(escaped);
      expect(kernel).not.toContain('7e3f19a2');
    } finally {
      closeSync(writer);
    }
  });
});

describe('SecretScrubber', () => {
  it('leaves no secret, no base64 of one, no line of one and no cut piece of one at either end of any text', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 8, maxLength: 40 }).filter((s) => s.trim() === s && !s.includes('\n') && !s.includes('[redacted]')), fc.string(), fc.string(), fc.integer({ min: 0, max: 40 }), (secret, before, after, cut) => {
        const scrubber = new SecretScrubber([Buffer.from(secret)]);
        const text = `${before}${secret}${after}${Buffer.from(secret).toString('base64')}`;
        expect(scrubber.scrub(Buffer.from(text)).toString()).not.toContain(secret);
        const tail = secret.slice(Math.min(cut, secret.length - 6));
        const piece = Buffer.byteLength(tail) >= 6 && Buffer.byteLength(tail) < Buffer.byteLength(secret);
        if (piece) expect(scrubber.scrub(Buffer.from(`${before}\n${tail} rest`)).toString()).not.toContain(`\n${tail}`);
      }),
    );
    expect(stepText(failed).toString()).toContain(PASSWORD);
  });
});

describe('scrubData', () => {
  it("takes the run's secrets out of a failure's data, so the failure report (KVP and wireserver) carries none", () => {
    const store = secrets();
    const reports = new EncodedReports((data) => scrubData(store, data));
    const report = reports.failure(failed, VM);
    expect(report).toContain('useradd: bad password [redacted]');
    noSecretIn([report]);
    expect(new EncodedReports().failure(failed, VM)).toContain(PASSWORD);
  });
});

describe('SecretScrubber with many secrets', () => {
  // The reference: every form tried on every line, in the scrubber's order (the longest first), as the scrubber did
  // before it looked forms up by a line's edges.
  function reference(secrets: readonly string[], text: Buffer): Buffer {
    const forms: Buffer[] = [];
    for (const secret of secrets) {
      const plain = [Buffer.from(secret), ...secret.split(/\r?\n/).map((l) => l.trim()).filter((l) => Buffer.byteLength(l) >= 8).map((l) => Buffer.from(l))];
      for (const form of plain) {
        const escaped = kmsgEscaped(form);
        forms.push(form, ...(escaped.equals(form) ? [] : [escaped]));
      }
      forms.push(Buffer.from(Buffer.from(secret).toString('base64')));
    }
    const sorted = forms.filter((f) => f.length >= 4).sort((a, b) => b.length - a.length);
    let out = text;
    for (const form of sorted) out = Buffer.from(out.toString('latin1').split(form.toString('latin1')).join(REDACTED), 'latin1');
    return Buffer.from(out.toString('latin1').split('\n').map((line) => sorted.reduce((l, form) => cutLine(l, form), Buffer.from(line, 'latin1')).toString('latin1')).join('\n'), 'latin1');
  }

  it('cuts exactly what trying every form on every line cuts, for many-line secrets and texts made of their pieces', () => {
    const line = fc.stringMatching(/^[a-z ]{8,24}$/).map((l) => l.trim()).filter((l) => l.length >= 8);
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 30 }), fc.string({ minLength: 8, maxLength: 20 }).filter((s) => s.trim() === s && !s.includes('\n')), fc.array(fc.tuple(fc.nat(), fc.nat(), fc.nat(), fc.constantFrom('', ' ', 'x1 ', '[    1.5] ')), { maxLength: 40 }), (lines, password, picks) => {
        const custom = lines.join('\n');
        const scrubber = new SecretScrubber([Buffer.from(password), Buffer.from(custom)]);
        const pool = [password, ...lines, custom];
        // Each text line: a noise prefix and a slice of some form, so lines start and end inside forms.
        const text = picks.map(([which, from, to, noise]) => {
          const source = pool[which % pool.length]!;
          const a = from % (source.length + 1);
          const b = a + (to % (source.length - a + 1));
          return `${noise}${source.slice(a, b)}`;
        }).join('\n');
        expect(scrubber.scrub(Buffer.from(text)).toString('latin1')).toBe(reference([password, custom], Buffer.from(text)).toString('latin1'));
      }),
      { numRuns: 300 },
    );
  });
});
