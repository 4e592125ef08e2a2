/**
 * The STATUS= lines and start-timeout extensions a run sends systemd (src/observe/systemd-status.ts), derived from
 * the real chart's snapshots and the actors it starts.
 */
import { createActor, fromPromise, toPromise } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createProvisioningMachine, HEALTH_FAILED, type ProvisioningContext } from '../../machines/provisioning.js';
import { EXTEND_SLACK_SECS, phaseOf, SystemdStatus, type StatusSnapshot } from '../../src/observe/systemd-status.js';
import { DEFAULT_CONFIG, type Config } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';
import { SHUTDOWN_TICK_MS } from '../../machines/provisioning/delays.js';

const machine = createProvisioningMachine();
const at = (value: unknown, context: Partial<ProvisioningContext> = {}): StatusSnapshot =>
  machine.resolveState({ value: value as never, context: { ...createActor(machine, { input: {} }).getSnapshot().context, config: DEFAULT_CONFIG, ...context } }) as unknown as StatusSnapshot;

describe('phaseOf', () => {
  it.each([
    [{ provisioning: { work: { gathering: { imds: 'fetching', media: 'reading' } }, inProgress: { sending: 'requesting' } } }, 'waiting for IMDS: attempt 1, 300 s left', 300],
    [{ provisioning: { work: { gathering: { imds: 'done', media: 'reading' } }, inProgress: 'done' } }, 'reading the provisioning media', 30],
    [{ provisioning: { work: 'checkingProxyAgent', inProgress: 'done' } }, 'waiting for the Azure Guest Proxy Agent, 130 s left', 130],
    [{ provisioning: { work: 'validating', inProgress: 'done' } }, 'configuring the OS', 300],
    [
      { provisioning: { work: { configuringOs: { hostname: 'done', account: { credentials: { password: 'done', sshKeys: 'fetchingCertificates' } }, sshd: 'done', customData: 'done' } }, inProgress: 'done' } },
      "configuring the OS: fetching the goal state's certificates: attempt 1, 120 s left",
      120,
    ],
    [{ provisioning: { work: 'configured', hostKeys: 'adding', inProgress: 'done' } }, 'OS configured, logins open: making the last ssh host keys', 300],
    ['completingHostKeys', 'provisioned earlier: making the ssh host keys a stop left missing', 60],
    ['reportingReady', 'reporting Ready: attempt 1, 1200 s left', 1200],
    [{ preprovisioned: 'reportingPoolReady' }, 'pool VM: reporting Ready to the pool: attempt 1, 1200 s left', 1200],
    [{ preprovisioned: 'waiting' }, 'pool VM: waiting to be claimed, poll 1', null],
    [{ preprovisioned: { waiting: { polling: 'backoff', lease: 'renewing' } } }, 'pool VM: waiting to be claimed, poll 1', null],
    [{ preprovisioned: 'detachingNic' }, 'Savable pool VM: waiting for the host to detach the network interface, 1200 s left', 1200],
    [{ preprovisioned: { attachingNic: 'probing' } }, "Savable pool VM: waiting for the customer's network interface, 86400 s left", 86400],
    [{ preprovisioned: 'awaitingShutdown' }, 'OS-disk pool VM: waiting for the host to shut it down', null],
    ['shutDownInPool', 'OS-disk pool VM: shut down by the host, as it waited to be', null],
    ['provisioned', 'provisioned', null],
    ['alreadyProvisioned', 'already provisioned: nothing to do', null],
    ['notOnAzure', 'not an Azure VM: nothing to do', null],
    ['alreadyRunning', 'another bootstate is provisioning this machine: nothing to do', null],
  ])('%j → %s', (value, text, budget) => {
    const phase = phaseOf(at(value))!;
    expect(phase.text({ attempt: 1, left: phase.budgetSecs })).toBe(text);
    expect(phase.budgetSecs).toBe(budget);
  });

  it('names the failure by its code, and the short budget once stopping', () => {
    const failure = { code: 'IMDS_FAILED' as const, reason: 'x', data: [['password', 'secret']] as Array<[string, string]>, exitCode: 1, retryable: false };
    const reporting = phaseOf(at('reportingFailure', { failure }))!;
    expect(reporting.text({ attempt: 4, left: 1150 })).toBe('reporting ProvisioningFailed (IMDS_FAILED): attempt 4, 1150 s left');
    const stopping = phaseOf(at('reportingFailure', { failure, terminating: true }))!;
    expect(stopping.budgetSecs).toBe(1.5);
    expect(stopping.key).not.toBe(reporting.key);
    expect(stopping.text({ attempt: 1, left: 1 })).toMatch(/^stopping: reporting ProvisioningFailed \(IMDS_FAILED\)/);
    expect(phaseOf(at('failed', { failure }))!.text({ attempt: 1, left: null })).toBe('provisioning failed (IMDS_FAILED); the failure was reported');
  });

  it("extends an OS-disk pool VM's unbounded wait one tick of the chart at a time", () => {
    const sent: Array<[string, number | undefined]> = [];
    new SystemdStatus({ status: (text, usec) => sent.push([text, usec]) }).update(at({ preprovisioned: 'awaitingShutdown' }));
    expect(sent).toEqual([['OS-disk pool VM: waiting for the host to shut it down', (SHUTDOWN_TICK_MS / 1000 + EXTEND_SLACK_SECS) * 1e6]]);
  });

  it('says nothing in the first state, which routes on what was read before the chart', () => {
    expect(phaseOf(at('starting'))).toBeNull();
  });
});

describe('SystemdStatus on a run of the real chart', () => {
  it('counts each phase’s attempts from its own start, and extends the start timeout by the rest of its budget plus slack', async () => {
    const config: Config = {
      ...DEFAULT_CONFIG,
      imds: { ...DEFAULT_CONFIG.imds, retry_interval_secs: 0.02, total_retry_timeout_secs: 0.15 },
      wireserver: { ...DEFAULT_CONFIG.wireserver, retry_interval_secs: 0.01, report_in_progress: false },
    };
    let failureReports = 0;
    const retryable = () => new BootstateError('IMDS_FAILED', 'unavailable', { retryable: true });
    const actors = {
      readMedia: fromPromise(async () => null),
      regenerateHostKeys: fromPromise(async () => undefined),
      fetchMetadata: fromPromise<never>(async () => Promise.reject(retryable())),
      reportHealth: fromPromise<void, { health: string }>(async ({ input }) => {
        if (input.health !== HEALTH_FAILED || ++failureReports > 2) return;
        throw new BootstateError('HTTP_STATUS', 'wireserver 503', { retryable: true });
      }),
    };
    const sent: Array<[string, number | undefined]> = [];
    const status = new SystemdStatus({ status: (text, usec) => sent.push([text, usec]) });
    const actor = createActor(createProvisioningMachine(actors as never), { input: { config, startup: { platform: { onAzure: true, why: 'test' }, vmId: '00000000-0000-0000-0000-000000000001', marker: 'none' } }, inspect: (e) => status.inspect(e) });
    actor.start();
    await toPromise(actor);

    const texts = [...new Set(sent.map(([text]) => text.replace(/, \d+ s left$/, '')))];
    const imds = texts.filter((t) => t.startsWith('waiting for IMDS'));
    expect(imds[0]).toBe('waiting for IMDS: attempt 1');
    expect(imds.length).toBeGreaterThanOrEqual(2);
    expect(imds).toEqual(imds.map((_, i) => `waiting for IMDS: attempt ${i + 1}`));
    const code = texts.find((t) => t.startsWith('reporting ProvisioningFailed'))!.match(/\((\w+)\)/)![1];
    expect(texts.slice(imds.length)).toEqual([
      `reporting ProvisioningFailed (${code}): attempt 1`,
      `reporting ProvisioningFailed (${code}): attempt 2`,
      `reporting ProvisioningFailed (${code}): attempt 3`,
      `provisioning failed (${code}); the failure was reported`,
    ]);
    // Every line of a running chart extends the start; the IMDS ones by at most its budget plus the slack.
    for (const [text, usec] of sent.filter(([t]) => t.startsWith('waiting for IMDS'))) {
      expect(usec, text).toBeGreaterThanOrEqual(EXTEND_SLACK_SECS * 1e6);
      expect(usec, text).toBeLessThanOrEqual((0.15 + EXTEND_SLACK_SECS) * 1e6);
    }
    expect(sent.at(-1)![1]).toBeUndefined();
  });
});
