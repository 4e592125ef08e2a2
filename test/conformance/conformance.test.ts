/**
 * The conformance suite: cases transcribed as facts (input, expected outcome) from cloud-init's, azure-init's and
 * WALinuxAgent's published tests and samples, in ./cases/*.json, run against bootstate's own parsers and encoders.
 * A case marked `differs` records, in one line, where bootstate departs from the peer on purpose.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseInstanceMetadata } from '../../src/azure/imds.js';
import { encodeFailureReport, encodeSuccessReport } from '../../src/azure/report.js';
import { BootstateError, failure, type ErrorCode } from '../../src/core/errors.js';
import { encodeRecord, KEY_FIELD_BYTES, VALUE_FIELD_BYTES } from '../../src/kvp/codec.js';
import { selectSshKeys } from '../../src/os/ssh/key-policy.js';
import { parseOvfEnv } from '../../src/azure/ovf.js';
import { readVmId } from '../../src/azure/vmid.js';
import { hostnameProblem, usernameProblem } from '../../src/os/validate.js';
import { SecretStore } from '../../src/core/secrets.js';
import { AGENT } from '../../src/core/version.js';


interface Case {
  peer: string;
  source: string;
  kind?: string;
  input: any;
  expect: Record<string, any>;
  differs?: string;
}

const CASES = path.join(import.meta.dirname, 'cases');
const files = readdirSync(CASES).filter((f) => f.endsWith('.json')).sort();
const load = (file: string) => JSON.parse(readFileSync(path.join(CASES, file), 'utf8')) as { area: string; cases: Case[] };

/** Runs `f`, returning its value or the code of the BootstateError it threw. */
async function outcome<T>(f: () => T | Promise<T>): Promise<{ value?: T; error?: string }> {
  try {
    return { value: await f() };
  } catch (error) {
    if (error instanceof BootstateError) return { error: error.code };
    throw error;
  }
}

const RUNNERS: Record<string, (c: Case) => Promise<void>> = {
  'imds.json': async (c) => {
    const result = await outcome(() => parseInstanceMetadata(JSON.stringify(c.input)));
    if (c.expect.error) return void expect(result.error).toBe(c.expect.error);
    expect(result.value).toMatchObject(c.expect);
  },
  'ovf.json': async (c) => {
    const secrets = new SecretStore();
    const result = await outcome(() => parseOvfEnv(c.input, { secrets, device: '/dev/sr0' }));
    if (c.expect.error) return void expect(result.error).toBe(c.expect.error);
    expect(result.value).toMatchObject(c.expect);
    secrets.clear();
  },
  'vmid.json': async (c) => {
    const { mkdtemp: temp, mkdir: dir, writeFile: write, rm: remove } = await import('node:fs/promises');
    const root = await temp(path.join(tmpdir(), 'conformance-vmid-'));
    try {
      await dir(path.join(root, 'sys/class/dmi/id'), { recursive: true });
      await write(path.join(root, 'sys/class/dmi/id/product_uuid'), `${c.input.productUuid}\n`);
      if (c.input.generation === 2) await dir(path.join(root, 'sys/firmware/efi'), { recursive: true });
      expect((await readVmId({ sysRoot: root })).vmId).toBe(c.expect.vmId);
    } finally {
      await remove(root, { recursive: true, force: true });
    }
  },
  'report.json': async (c) => {
    const options = { vmId: c.input.vmId, timestamp: new Date(c.input.timestamp) };
    const encoded = c.input.result === 'success'
      ? encodeSuccessReport(options)
      : encodeFailureReport(failure(c.input.code as ErrorCode, c.input.data), options);
    expect(encoded).toBe(c.expect.encoded.replace('<agent>', AGENT));
  },
  'kvp.json': async (c) => {
    const record = encodeRecord({ key: c.input.key, value: c.input.value });
    expect([record.length, KEY_FIELD_BYTES, VALUE_FIELD_BYTES]).toEqual([c.expect.recordBytes, c.expect.keyField, c.expect.valueField]);
    expect(record.subarray(0, KEY_FIELD_BYTES).toString('utf8').replace(/\0+$/, '')).toBe(c.input.key);
    expect(record.subarray(KEY_FIELD_BYTES).toString('utf8').replace(/\0+$/, '')).toBe(c.input.value);
  },
  'names-and-keys.json': async (c) => {
    if (c.kind === 'username') return void expect(usernameProblem(c.input) === null, usernameProblem(c.input) ?? '').toBe(c.expect.accepted);
    if (c.kind === 'hostname') return void expect(hostnameProblem(c.input) === null, hostnameProblem(c.input) ?? '').toBe(c.expect.accepted);
    const result = await outcome(() => selectSshKeys(c.input.keyData, c.input.passwordAuthentication));
    if (c.expect.error) return void expect(result.error).toBe(c.expect.error);
    expect([result.value?.keys.length, result.value?.skipped.length]).toEqual([c.expect.kept, c.expect.skipped]);
  },
};

describe('conformance with the peers’ published tests', () => {
  it('has a runner for every case file, and every case names its peer and source', () => {
    for (const file of files) {
      expect(RUNNERS[file], file).toBeDefined();
      for (const c of load(file).cases) expect([c.peer, c.source].every(Boolean), JSON.stringify(c).slice(0, 80)).toBe(true);
    }
  });

  for (const file of files) {
    const { area, cases } = load(file);
    describe(area, () => {
      for (const c of cases) {
        it(`${c.peer}: ${c.source}${c.differs ? ` — differs: ${c.differs}` : ''}`, () => RUNNERS[file]!(c));
      }
    });
  }
});
