/**
 * A failed first boot explains itself through KVP, on a real boot (Debian 12, systemd as PID 1 under systemd-nspawn,
 * the .deb installed, the fake fabric at Azure's addresses). The image's `useradd` is wrapped to fail, printing the VM
 * owner's user data on its stderr; the pool file is then read from outside the VM, as the host would, with
 * `bootstate kvp diag`: it holds the boot timeline (systemd's timestamps, the unit's start, READY=1, the failure
 * report accepted), the failing step's diagnostics with the secret scrubbed out, and the kernel log's tail (or why the
 * container could not read it). Every record fits the pool's limits and no secret is in any record, decoded or not.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_RECORDS, SAFE_KEY_BYTES, SAFE_VALUE_BYTES, decodeRecords } from '../../src/kvp/codec.js';
import { unpackDiagnostics } from '../../src/kvp/diagnostics.js';
import { canSandbox, REPO } from '../e2e/ns.js';
import { agentEnded, createMachine, until, type Boot, type Machine } from './machine.js';
import { createRig, imdsDocument, type Rig } from './scenario.js';

const TAG = `bsd${process.pid}${randomBytes(2).toString('hex')}`;
const SECRET = `UserData-Canary-${randomBytes(6).toString('hex')}`;
const NEEDLES = [SECRET, Buffer.from(SECRET).toString('base64'), SECRET.slice(6), SECRET.slice(0, 14)];

/** Found before /usr/sbin in the unit's PATH: fails, saying the secret on stderr. */
const FAILING_USERADD = `#!/bin/sh
echo "useradd: cannot lock /etc/passwd; try again later (${SECRET})" >&2
echo "${SECRET}" >&2
exit 1
`;

interface Seen {
  pool: Buffer;
  diagText: string;
  diagJson: { timelines: Array<{ fields: Record<string, string> }>; texts: Array<{ name: string; text?: string; problem?: string }> };
  diagCode: number;
  reports: string[];
  story: string;
}

let rig: Rig;
let machine: Machine | null = null;
let seen: Promise<Seen>;

async function storyOf(boot: Boot): Promise<string> {
  const unit = await boot.exec(['journalctl', '--no-pager', '-q', '-b', '-u', 'bootstate.service', '-o', 'short-monotonic']);
  return `bootstate.service journal:\n${unit.stdout}\nconsole (end):\n${boot.console().slice(-3000)}`;
}

async function failingUseraddLayer(): Promise<string> {
  const dir = path.join(rig.workDir, 'failing-useradd');
  await mkdir(path.join(dir, 'usr/local/sbin'), { recursive: true });
  await writeFile(path.join(dir, 'usr/local/sbin/useradd'), FAILING_USERADD);
  await chmod(path.join(dir, 'usr/local/sbin/useradd'), 0o755);
  return dir;
}

async function kvpDiag(pool: string, json: boolean): Promise<{ code: number; stdout: string }> {
  const args = [path.join(REPO, 'dist/bootstate.mjs'), 'kvp', 'diag', '--file', pool, ...(json ? ['--json'] : [])];
  try {
    const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 30_000 });
    return { code: 0, stdout };
  } catch (error) {
    const e = error as { code?: number; stdout?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '' };
  }
}

async function failedBoot(): Promise<Seen> {
  const doc = imdsDocument(rig.publicKey);
  doc.compute.userData = Buffer.from(SECRET).toString('base64');
  const m = await createMachine({ name: TAG, workDir: rig.workDir, layers: [await failingUseraddLayer(), rig.debLayer, rig.debian], imdsDocument: doc, kernelLog: true });
  machine = m;
  const boot = await m.boot();
  let story = '';
  try {
    await until('the failure report', async () => ((await m.reportKinds()).some((k) => k.includes('ProvisioningFailed')) ? true : null), 180_000, () => storyOf(boot));
    await agentEnded(boot);
    story = await storyOf(boot);
  } finally {
    await boot.shutdown();
  }
  // Read from outside the VM, as the host reads the pool: the file on the VM's disk.
  const poolFile = m.diskPath('/var/lib/hyperv/.kvp_pool_1');
  const text = await kvpDiag(poolFile, false);
  const json = await kvpDiag(poolFile, true);
  return { pool: await readFile(poolFile), diagText: text.stdout, diagJson: JSON.parse(json.stdout), diagCode: text.code, reports: await m.reportKinds(), story };
}

describe.skipIf(!canSandbox)('a failed first boot on a booted Debian 12, seen from outside through KVP', () => {
  beforeAll(async () => {
    rig = await createRig();
    seen = failedBoot();
    seen.catch(() => undefined);
  }, 900_000);

  afterAll(async () => {
    await seen?.catch(() => undefined);
    await machine?.destroy().catch(() => undefined);
    await rig?.cleanup();
  }, 120_000);

  it('failed, and the fabric heard it', async () => {
    const s = await seen;
    expect(s.reports, s.story).toContain('NotReady/ProvisioningFailed');
  }, 900_000);

  it('holds the boot timeline: systemd\'s user space start, the unit\'s start, READY=1 and the failure report accepted, in order', async () => {
    const s = await seen;
    expect(s.diagCode, `${s.diagText}\n${s.story}`).toBe(0);
    expect(s.diagJson.timelines, s.story).toHaveLength(1);
    const f = s.diagJson.timelines[0]!.fields;
    expect(f.result).toBe('failed');
    const order = ['userspace_ms', 'unit_start_ms', 'ready1_ms', 'failure_accepted_ms', 'written_ms'].map((k) => Number(f[k]));
    for (const value of order) expect(value, JSON.stringify(f)).toBeGreaterThan(0);
    expect([...order].sort((a, b) => a - b), JSON.stringify(f)).toEqual(order);
    expect(s.diagText).toMatch(/READY=1 sent +\d+\.\d ms/);
    console.info(`bootstate kvp diag, from outside the VM (first lines):\n${s.diagText.split('\n').slice(0, 40).join('\n')}`);
  }, 900_000);

  it("holds the failing step's diagnostics (useradd's stderr, the secret scrubbed) and the kernel log's tail", async () => {
    const s = await seen;
    const step = s.diagJson.texts.find((t) => t.name === 'step');
    expect(step?.text, s.diagText).toContain('code: USER_FAILED');
    expect(step?.text).toMatch(/^command: useradd .* azureuser$/m);
    expect(step?.text).toContain('useradd: cannot lock /etc/passwd; try again later ([redacted])');
    const kernel = s.diagJson.texts.find((t) => t.name === 'kernel-log');
    expect(kernel?.problem, s.diagText).toBeUndefined();
    expect(kernel?.text, `${s.diagText}\ntimeline: ${JSON.stringify(s.diagJson.timelines)}`).toMatch(/^\[ *\d+\.\d{6}\] /m);
  }, 900_000);

  it("says in the unit's journal what writing them cost, and the journal carries no secret either", async () => {
    const s = await seen;
    const cost = /boot diagnostics: (\d+) KVP records in (\d+\.\d) ms/.exec(s.story);
    expect(cost, s.story).not.toBeNull();
    console.info(`boot diagnostics on the booted failed boot: ${cost![1]} records in ${cost![2]} ms`);
    expect(s.story.split('\n').filter((line) => NEEDLES.some((needle) => line.includes(needle)))).toEqual([]);
  }, 900_000);

  it("keeps every record within the pool's limits, and no secret in any record, raw or decoded", async () => {
    const s = await seen;
    const records = decodeRecords(s.pool);
    expect(records.length).toBeLessThanOrEqual(MAX_RECORDS);
    for (const r of records) {
      expect(Buffer.byteLength(r.key)).toBeLessThanOrEqual(SAFE_KEY_BYTES);
      expect(Buffer.byteLength(r.value)).toBeLessThanOrEqual(SAFE_VALUE_BYTES);
    }
    const { texts } = unpackDiagnostics(records);
    const everything = [s.pool.toString('latin1'), s.diagText, ...texts.map((t) => t.bytes?.toString('latin1') ?? '')];
    for (const needle of NEEDLES) for (const text of everything) expect(text.includes(needle), needle).toBe(false);
  }, 900_000);
});
