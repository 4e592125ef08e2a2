/**
 * Waiting for Azure's Guest Proxy Agent (src/os/proxy-agent.ts) with a fake `azure-proxy-agent` in PATH: ready,
 * not ready (its exit code and output in the failure), not installed, and one that ignores --wait.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { run, type Runner } from '../../src/system/exec.js';
import { parseOvfEnv } from '../../src/azure/ovf.js';
import { checkProxyAgent } from '../../src/os/proxy-agent.js';
import { SecretStore } from '../../src/core/secrets.js';
import { ovfDocument } from '../../src/fabric/ovf-document.js';

let dir: string;
const signal = new AbortController().signal;
/** Runs commands with `dir` first in PATH, where the fake agent lives. */
const inPath: Runner = (argv, options) => run(argv, { ...options, env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
const fake = async (script: string) => {
  const file = path.join(dir, 'azure-proxy-agent');
  await writeFile(file, `#!/bin/sh\necho "$@" > "${dir}/argv"\n${script}\n`);
  await chmod(file, 0o755);
};
const failureOf = (promise: Promise<unknown>) => promise.then(() => null, (e: unknown) => e as BootstateError);

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'bootstate-gpa-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('checkProxyAgent', () => {
  it('resolves once `azure-proxy-agent --status --wait N` exits 0', async () => {
    await fake('exit 0');
    await expect(checkProxyAgent(120, inPath, signal)).resolves.toEqual({ detail: 'azure-proxy-agent is ready' });
    expect((await readFile(path.join(dir, 'argv'), 'utf8')).trim()).toBe('--status --wait 120');
  });

  it('a non-zero exit is "azure-proxy-agent status failure" with its exit code and output', async () => {
    await fake('echo "proxy not ready"; echo "ebpf program not loaded" >&2; exit 3');
    const error = await failureOf(checkProxyAgent(5, inPath, signal));
    expect(error).toMatchObject({ code: 'PROXY_AGENT_STATUS_FAILURE', reason: 'azure-proxy-agent status failure' });
    expect(error!.data).toEqual([['exit_code', '3'], ['stdout', 'proxy not ready'], ['stderr', 'ebpf program not loaded']]);
  });

  it('not installed is "azure-proxy-agent not found"', async () => {
    const nowhere: Runner = (argv, options) => run(argv, { ...options, env: { ...process.env, PATH: dir } });
    const error = await failureOf(checkProxyAgent(5, nowhere, signal));
    expect(error).toMatchObject({ code: 'PROXY_AGENT_NOT_FOUND', reason: 'azure-proxy-agent not found' });
  });

  it('an agent that ignores --wait is cut off a few seconds after it', async () => {
    await fake('exec sleep 60');
    const error = await failureOf(checkProxyAgent(0.5, inPath, signal));
    expect(error?.code).toBe('PROXY_AGENT_STATUS_FAILURE');
  }, 30_000);
});

describe("the media's ProvisionGuestProxyAgent", () => {
  it('is read from PlatformSettings, absent or false meaning no', () => {
    const base = ovfDocument({ username: 'azureuser', hostname: 'web-01' });
    const withFlag = (value: string) =>
      base.replace('<wa:ProvisionGuestAgent>true</wa:ProvisionGuestAgent>', `<wa:ProvisionGuestAgent>true</wa:ProvisionGuestAgent>\n      <wa:ProvisionGuestProxyAgent>${value}</wa:ProvisionGuestProxyAgent>`);
    const parse = (xml: string) => parseOvfEnv(xml, { secrets: new SecretStore(), device: '/dev/sr0' });
    expect(parse(withFlag('true')).provisionGuestProxyAgent).toBe(true);
    expect(parse(withFlag(' True ')).provisionGuestProxyAgent).toBe(true);
    expect(parse(withFlag('false')).provisionGuestProxyAgent).toBeUndefined();
    expect(parse(base).provisionGuestProxyAgent).toBeUndefined();
  });
});
