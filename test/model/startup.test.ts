/**
 * The chart's first state: what src/provision/provision.ts read before the chart (the config, the platform, the instance
 * lock, the VM id, the marker) decides where the run goes, at once.
 */
import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED, HEALTH_READY } from '../../machines/provisioning.js';
import { STEP } from '../support/chart.js';
import { complete, running } from './gates.js';
import { startRun, startup } from './harness.js';
import { CONFIG_FAILURE, LOCK_REFUSED, NOT_ON_AZURE, PLATFORM_FAILURE, VM_ID } from './support.js';

describe('startup', () => {
  it('a config load failure still reports ProvisioningFailed with reason "failed to load config" and exits 78', async () => {
    const run = startRun(startup({ configFailure: CONFIG_FAILURE }));

    expect(run.actor.getSnapshot().value).toEqual({ reportingFailure: 'requesting' });
    const report = running(run, 'failureReport');
    expect(report.input).toMatchObject({ health: HEALTH_FAILED, vmId: VM_ID, failure: { reason: 'failed to load config' } });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_FAILED, vmId: VM_ID, failure: report.input.failure, ppsType: 'None' }]);
    expect(run.gates.map((g) => g.id)).toEqual([STEP.failureReport]);

    await complete(run, 'failureReport');
    expect(run.actor.getSnapshot().output).toEqual({
      result: 'failed',
      reason: 'failed to load config',
      code: 'CONFIG_INVALID',
      exitCode: 78,
      reported: true,
    });
  });

  it('a config load failure on a provisioned VM id reports nothing and exits 0, with a warning naming it', () => {
    const run = startRun(startup({ configFailure: CONFIG_FAILURE, marker: 'provisioned' }));

    expect(run.actor.getSnapshot().value).toBe('alreadyProvisioned');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'already-provisioned', exitCode: 0, reported: false });
    expect(run.gates).toEqual([]);
    expect(run.kvp).toEqual([]);
    expect(run.systemd).toEqual(['READY']);
    expect(run.actor.getSnapshot().context.warnings).toEqual([
      'failed to load config (error bad toml at line 3); already provisioned: nothing is reported',
    ]);
  });

  it('a config load failure with Ready pending reports Ready, not ProvisioningFailed', async () => {
    const run = startRun(startup({ configFailure: CONFIG_FAILURE, marker: 'report-pending' }));
    await complete(run, 'missingHostKeys');

    expect(run.actor.getSnapshot().value).toEqual({ reportingReady: 'requesting' });
    expect(running(run, 'readyReport').input).toMatchObject({ health: HEALTH_READY, vmId: VM_ID, failure: null });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'None' }]);
    expect(run.actor.getSnapshot().context.warnings).toEqual([
      'failed to load config (error bad toml at line 3); the OS was configured on an earlier boot: Ready is reported',
    ]);

    await complete(run, 'readyReport');
    await complete(run, 'provisionedMarker');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.gates.map((g) => g.id)).toEqual([STEP.missingHostKeys, STEP.readyReport, STEP.provisionedMarker]);
  });

  it('a config load failure on a pool VM waiting to be claimed is reported, as on a first boot', () => {
    const run = startRun(startup({ configFailure: CONFIG_FAILURE, marker: 'waiting-for-reuse' }));
    expect(run.actor.getSnapshot().value).toEqual({ reportingFailure: 'requesting' });
    expect(running(run, 'failureReport').input).toMatchObject({ health: HEALTH_FAILED, failure: { reason: 'failed to load config' } });
  });

  it('off Azure nothing is sent, and the run exits 0, a config failure or not', () => {
    for (const configFailure of [CONFIG_FAILURE, null]) {
      const run = startRun(startup({ platform: NOT_ON_AZURE, configFailure }));
      expect(run.actor.getSnapshot().output).toEqual({ result: 'not-on-azure', exitCode: 0, reported: false });
      expect(run.gates).toEqual([]);
      expect(run.kvp).toEqual([]);
    }
  });

  it('a platform check that cannot decide lets the run go on, with a warning', () => {
    const run = startRun(startup({ platform: PLATFORM_FAILURE }));
    expect(running(run, 'imds')).toBeDefined();
    expect(run.actor.getSnapshot().context.warnings).toEqual(['platform check failed: I/O error; provisioning goes on']);
  });

  it('a run refused the instance lock ends at once with ALREADY_RUNNING, reporting nothing, on Azure or not', () => {
    for (const platform of [undefined, NOT_ON_AZURE]) {
      const run = startRun(startup({ lockRefused: LOCK_REFUSED, configFailure: CONFIG_FAILURE, ...(platform ? { platform } : {}) }));
      expect(run.actor.getSnapshot().value).toBe('alreadyRunning');
      expect(run.actor.getSnapshot().output).toEqual({ result: 'failed', reason: 'another instance is running', code: 'ALREADY_RUNNING', exitCode: 1, reported: false });
      expect(run.gates).toEqual([]);
      expect(run.kvp).toEqual([]);
      // systemd may go on: this agent does nothing more.
      expect(run.systemd).toEqual(['READY']);
    }
  });

  it('an already provisioned VM reports nothing and exits 0', () => {
    const run = startRun(startup({ marker: 'provisioned' }));

    expect(run.actor.getSnapshot().status).toBe('done');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'already-provisioned', exitCode: 0, reported: false });
    expect(run.gates).toEqual([]);
    expect(run.kvp).toEqual([]);
  });

  it('a report-pending marker skips provisioning and reports Ready', async () => {
    const run = startRun(startup({ marker: 'report-pending' }));
    expect(run.kvp).toEqual([]);
    await complete(run, 'missingHostKeys');

    expect(run.actor.getSnapshot().value).toEqual({ reportingReady: 'requesting' });
    expect(run.actor.getSnapshot().hasTag(HEALTH_READY)).toBe(true);
    expect(running(run, 'readyReport').input).toMatchObject({ health: HEALTH_READY, vmId: VM_ID, failure: null });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'None' }]);

    await complete(run, 'readyReport');
    await complete(run, 'provisionedMarker');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.gates.map((g) => g.id)).toEqual([STEP.missingHostKeys, STEP.readyReport, STEP.provisionedMarker]);
  });
});
