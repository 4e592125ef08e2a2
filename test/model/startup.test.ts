import { describe, expect, it } from 'vitest';
import { HEALTH_FAILED, HEALTH_READY } from '../../machines/provisioning.js';
import { BootstateError } from '../../src/core/errors.js';
import { pastMarker, startRun } from './harness.js';
import { NOT_ON_AZURE, ON_AZURE, TEST_CONFIG, VM_ID } from './support.js';

describe('startup', () => {
  it('a config load failure still reports ProvisioningFailed with reason "failed to load config" and exits 78', async () => {
    const run = startRun();
    await run.reject('config', new BootstateError('CONFIG_INVALID', 'bad toml at line 3'));
    await run.resolve('platform', ON_AZURE);
    await run.resolve('vmId', VM_ID);

    expect(run.actor.getSnapshot().value).toEqual({ reportingFailure: 'requesting' });
    const report = run.pending('failureReport');
    expect(report.input).toMatchObject({ health: HEALTH_FAILED, vmId: VM_ID, failure: { reason: 'failed to load config' } });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_FAILED, vmId: VM_ID, failure: report.input.failure, ppsType: 'None' }]);
    expect(run.gates.some((g) => g.id === 'marker')).toBe(false);

    await run.resolve('failureReport');
    expect(run.actor.getSnapshot().output).toEqual({
      result: 'failed',
      reason: 'failed to load config',
      code: 'CONFIG_INVALID',
      exitCode: 78,
      reported: true,
    });
  });

  it('off Azure nothing more is read or sent, and the run exits 0, a config failure or not', async () => {
    for (const config of [null, TEST_CONFIG]) {
      const run = startRun();
      if (config) await run.resolve('config', config);
      else await run.reject('config', new BootstateError('CONFIG_INVALID', 'bad toml at line 3'));
      await run.resolve('platform', NOT_ON_AZURE);
      expect(run.actor.getSnapshot().output).toEqual({ result: 'not-on-azure', exitCode: 0, reported: false });
      expect(run.gates.map((g) => g.id)).toEqual(['config', 'platform']);
      expect(run.kvp).toEqual([]);
    }
  });

  it('a platform check that cannot decide lets the run go on, with a warning', async () => {
    const run = startRun();
    await run.resolve('config', TEST_CONFIG);
    await run.reject('platform', new BootstateError('IO', 'cannot read sysfs'));
    expect(run.pending('vmId')).toBeDefined();
    expect(run.actor.getSnapshot().context.warnings).toEqual(['platform check failed: I/O error; provisioning goes on']);
  });

  it('an already provisioned VM reports nothing and exits 0', async () => {
    const run = startRun();
    await pastMarker(run, TEST_CONFIG, VM_ID, 'provisioned');

    expect(run.actor.getSnapshot().status).toBe('done');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'already-provisioned', exitCode: 0, reported: false });
    expect(run.gates.map((g) => g.id)).toEqual(['config', 'platform', 'vmId', 'marker']);
    expect(run.kvp).toEqual([]);
  });

  it('a report-pending marker skips provisioning and reports Ready', async () => {
    const run = startRun();
    await pastMarker(run, TEST_CONFIG, VM_ID, 'report-pending');

    expect(run.actor.getSnapshot().value).toEqual({ reportingReady: 'requesting' });
    expect(run.actor.getSnapshot().hasTag(HEALTH_READY)).toBe(true);
    expect(run.pending('readyReport').input).toMatchObject({ health: HEALTH_READY, vmId: VM_ID, failure: null });
    expect(run.kvp.map((r) => r.event)).toEqual([{ type: 'kvp.report', health: HEALTH_READY, vmId: VM_ID, failure: null, ppsType: 'None' }]);

    await run.resolve('readyReport');
    await run.resolve('provisionedMarker');
    expect(run.actor.getSnapshot().output).toEqual({ result: 'provisioned', exitCode: 0, reported: true });
    expect(run.gates.map((g) => g.id)).toEqual(['config', 'platform', 'vmId', 'marker', 'readyReport', 'provisionedMarker']);
  });
});
