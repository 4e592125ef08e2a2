import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSandbox, createNetns, createSandbox, runInSandbox, type Sandbox } from './ns.js';

describe.skipIf(!canSandbox)('the namespace sandbox', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await createSandbox({ productUuid: '11111111-2222-3333-4444-555555555555', hostname: 'inside' });
  });
  afterAll(async () => sandbox?.cleanup());

  it('creates a user in the sandbox passwd file and not in the host one', async () => {
    const result = await runInSandbox(sandbox, ['useradd', '--create-home', 'harnessprobe']);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(await readFile(sandbox.hostPath('/etc/passwd'), 'utf8')).toMatch(/^harnessprobe:/m);
    expect(await readFile('/etc/passwd', 'utf8')).not.toMatch(/^harnessprobe:/m);
    const home = await runInSandbox(sandbox, ['stat', '-c', '%U', '/home/harnessprobe']);
    expect(home.stdout.trim()).toBe('harnessprobe');
  });

  it('sets the hostname inside without changing the host hostname', async () => {
    const before = hostname();
    const result = await runInSandbox(sandbox, ['sh', '-c', 'hostname changed-inside && hostname']);
    expect(result.stdout.trim()).toBe('changed-inside');
    expect(hostname()).toBe(before);
  });

  it('starts with the sandbox hostname from its /etc/hostname', async () => {
    const result = await runInSandbox(sandbox, ['hostname']);
    expect(result.stdout.trim()).toBe('inside');
  });

  it('shows the fake product_uuid at the real sysfs path', async () => {
    const result = await runInSandbox(sandbox, ['cat', '/sys/class/dmi/id/product_uuid']);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe('11111111-2222-3333-4444-555555555555');
  });

  it('runs inside a network namespace where the Azure addresses are local', async () => {
    const netns = await createNetns(`bs-harness-${process.pid}`);
    try {
      const result = await runInSandbox(sandbox, ['ip', '-o', 'addr', 'show', 'dev', 'lo'], { netns: netns.name });
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.stdout).toContain('169.254.169.254/32');
      expect(result.stdout).toContain('168.63.129.16/32');
    } finally {
      await netns.delete();
    }
  });
});
