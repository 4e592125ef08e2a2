/**
 * The built agent against the fake fabric on loopback: `--only`/`--skip` (the steps left out never run, the run
 * still reports, the log and the journal say which steps were skipped and why), and what happens when the platform
 * says there was custom data and none arrived.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeReport } from '../../src/azure/report.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { readJournal } from '../../src/inspect/journal.js';
import { lastFailureDescription, reportKinds, runAgent } from './agent.js';

let fabric: FakeFabric;
beforeEach(async () => {
  fabric = await startFakeFabric();
});
afterEach(async () => {
  await fabric.close();
});

const logLines = (root: string) =>
  readFileSync(join(root, 'var/log/bootstate.log'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
const journalStates = (root: string) => {
  const runs = join(root, 'var/lib/bootstate/runs');
  return readdirSync(runs).flatMap((name) => readJournal(join(runs, name)).map((line) => JSON.stringify(line)));
};

describe('provision --only / --skip', () => {
  it('--only hostname sets the hostname, touches no account or sshd, reports Ready, and logs each skipped step with why', async () => {
    const run = await runAgent(fabric, { args: ['--only', 'hostname'] });
    expect(run.code, run.stderr).toBe(0);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'Ready']);
    expect(readFileSync(join(run.root, 'etc/hostname'), 'utf8')).toBe('web-01\n');
    expect(existsSync(join(run.root, 'etc/passwd'))).toBe(false);
    expect(existsSync(join(run.root, 'home/azureuser'))).toBe(false);
    expect(existsSync(join(run.root, 'etc/ssh/sshd_config.d/00-bootstate.conf'))).toBe(false);
    const skipped = logLines(run.root).filter((l) => l.skipped === true).map((l) => l.msg);
    expect(skipped).toEqual([
      'step user skipped (--only hostname)',
      'step password skipped (--only hostname)',
      'step ssh-keys skipped (--only hostname)',
      'step sshd skipped (--only hostname)',
      'step host-keys skipped (--only hostname)',
      'step custom-data skipped (--only hostname)',
      'step resource-disk skipped (--only hostname)',
    ]);
    // The journal shows the skip transitions themselves, with the guard that took them.
    const journal = journalStates(run.root).join('\n');
    expect(journal).toContain('configuringOs.account.creatingUser -> provisioning.provisioning.work.configuringOs.account.credentials on (always) [stepSkipped]');
    expect(journal).toContain('configuringOs.sshd.configuring -> provisioning.provisioning.work.configuringOs.sshd.done on (always) [stepSkipped]');
    expect(journal).not.toContain('hostname.setting -> provisioning.provisioning.work.configuringOs.hostname.done on (always)');
  });

  it('--skip sshd,ssh-keys runs the rest', async () => {
    const run = await runAgent(fabric, { args: ['--skip', 'sshd,ssh-keys'] });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(run.root, 'etc/passwd'), 'utf8')).toContain('azureuser:');
    expect(existsSync(join(run.root, 'home/azureuser/.ssh/authorized_keys'))).toBe(false);
    expect(existsSync(join(run.root, 'etc/ssh/sshd_config.d/00-bootstate.conf'))).toBe(false);
  });

  // The user was never created on this fresh VM: that is OS state, not bad metadata or configuration, so it is
  // exit 1 (docs/cli.md#exit-codes), not 78, and the report names it.
  it.each([['--only', 'ssh-keys'], ['--skip', 'user']])('%s %s on a fresh VM fails with user not found, exit 1', async (flag, steps) => {
    const run = await runAgent(fabric, { args: [flag, steps] });
    expect(run.code, run.stderr).toBe(1);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'NotReady/ProvisioningFailed']);
    expect(new Map(decodeReport(lastFailureDescription(fabric)!)).get('reason')).toBe('user not found');
  });

  it('an unknown step is a usage error (exit 2) and nothing is reported', async () => {
    const run = await runAgent(fabric, { args: ['--only', 'hostname,sudo'] });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--only: unknown step "sudo"');
    expect(fabric.reports).toEqual([]);
  });
});

describe('hasCustomData without custom data', () => {
  const claimsCustomData = () => {
    const doc = exampleImdsDocument();
    doc.extended.compute.hasCustomData = true;
    fabric.setImdsDocument(doc);
  };

  it('warns and provisions by default', async () => {
    claimsCustomData();
    const run = await runAgent(fabric);
    expect(run.code, run.stderr).toBe(0);
    expect(logLines(run.root).some((l) => l.level === 40 && String(l.msg).includes('hasCustomData is true but no CustomData arrived'))).toBe(true);
  });

  it('fails with MissingCustomData, before any OS change, with [custom_data] require = true', async () => {
    claimsCustomData();
    const run = await runAgent(fabric, { extraToml: '[custom_data]\nrequire = true\n' });
    expect(run.code).toBe(1);
    expect(reportKinds(fabric)).toEqual(['NotReady/Provisioning', 'NotReady/ProvisioningFailed']);
    expect(new Map(decodeReport(lastFailureDescription(fabric)!)).get('reason')).toBe('failure to read customData while hasCustomData=true');
    expect(existsSync(join(run.root, 'etc/passwd'))).toBe(false);
  });
});
