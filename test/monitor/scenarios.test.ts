/**
 * Outages played against the monitor chart on a simulated clock with the default periods and windows. The fake
 * actors classify scripted answers with the real classifiers, so what is checked is what the fabric would see.
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromPromise, SimulatedClock, toPromise } from 'xstate';
import { HEARTBEAT, IMDS_HEARTBEAT, monitorInput, monitorMachine, VERSIONS } from '../../machines/monitor.js';
import type { Observation } from '../../src/azure/healthservice.js';
import { classifyHealth, classifyVersions } from '../../src/azure/hostplugin.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { validateImdsDocument } from '../../src/monitor/imds-heartbeat.js';
import { exampleImdsDocument } from '../../src/fabric/imds-document.js';
import { recordingReporter, settle } from './harness.js';

const MINUTE = 60_000;

interface Script {
  /** Status `/health` answers at a given clock time. */
  health?: (now: number) => number;
  /** Document IMDS serves at a given clock time. */
  imds?: (now: number) => unknown;
}

/** Starts the chart with default configuration on a simulated clock; returns what it reported. */
function startMonitor(script: Script) {
  const clock = new SimulatedClock();
  const observations: Observation[] = [];
  let flushes = 0;
  const stamped = <T>(result: T) => ({ ...result, at: clock.now() });
  const machine = monitorMachine.provide({
    actors: {
      checkHeartbeat: fromPromise(async () => stamped(classifyHealth(script.health?.(clock.now()) ?? 200))),
      checkVersions: fromPromise(async () => stamped(classifyVersions(200, '["2015-09-01"]'))),
      checkImds: fromPromise(async () =>
        stamped(validateImdsDocument(JSON.stringify(script.imds?.(clock.now()) ?? exampleImdsDocument()))),
      ),
      reporter: recordingReporter(observations),
      flush: fromPromise(async () => {
        flushes += 1;
      }),
    },
  });
  const actor = createActor(machine, { input: monitorInput(DEFAULT_CONFIG.monitor, false), clock });
  actor.start();
  return {
    actor,
    observations,
    flushes: () => flushes,
    /** Moves the clock minute by minute, letting each measurement finish. */
    async runFor(minutes: number) {
      await settle();
      for (let i = 0; i < minutes; i++) {
        clock.increment(MINUTE);
        await settle();
      }
    },
    /** `IsHealthy` of every observation named `name`, one per minute from minute 0. */
    timeline(name: string) {
      return observations.filter((o) => o.ObservationName === name).map((o) => o.IsHealthy);
    },
  };
}

/** Fails (500) for `minutes` minutes starting at the first minute, then answers 200. */
const outage = (minutes: number) => (now: number) => (now >= MINUTE && now < MINUTE * (1 + minutes) ? 500 : 200);

describe('host plugin heartbeat roll-up', () => {
  it('reports only healthy heartbeats through a 4-minute outage', async () => {
    const monitor = startMonitor({ health: outage(4) });
    await monitor.runFor(8);
    expect(monitor.timeline(HEARTBEAT)).toEqual(Array(9).fill(true));
  });

  it('turns unhealthy at the 5-minute mark of a 6-minute outage and healthy again on the first success', async () => {
    const monitor = startMonitor({ health: outage(6) });
    await monitor.runFor(8);
    // Minute 0 healthy; failures from minute 1; minute 6 is five minutes into the streak; minute 7 answers 200.
    expect(monitor.timeline(HEARTBEAT)).toEqual([true, true, true, true, true, true, false, true, true]);
  });

  it('stays healthy when the plugin answers 502 for its upstream, however long', async () => {
    const monitor = startMonitor({ health: () => 502 });
    await monitor.runFor(10);
    expect(monitor.timeline(HEARTBEAT)).toEqual(Array(11).fill(true));
  });

  it('sends one observation per signal per period, and versions only until the plugin is available', async () => {
    const monitor = startMonitor({});
    await monitor.runFor(3);
    expect(monitor.timeline(HEARTBEAT)).toHaveLength(4);
    expect(monitor.timeline(IMDS_HEARTBEAT)).toHaveLength(4);
    expect(monitor.timeline(VERSIONS)).toEqual([true]);
  });
});

describe('IMDS heartbeat', () => {
  it('carries the validation reason in Value and turns unhealthy after three minutes', async () => {
    const monitor = startMonitor({ imds: () => ({ compute: {} }) });
    await monitor.runFor(4);
    const imds = monitor.observations.filter((o) => o.ObservationName === IMDS_HEARTBEAT);
    expect(imds.map((o) => o.Value)).toEqual(Array(5).fill('Missing field: [network]'));
    expect(imds.map((o) => o.IsHealthy)).toEqual([true, true, true, false, false]);
  });

  it('names the first empty field of the network chain', async () => {
    const doc = exampleImdsDocument() as { network: { interface: Array<{ ipv4: { ipAddress: unknown[] } }> } };
    doc.network.interface[0].ipv4.ipAddress = [];
    const monitor = startMonitor({ imds: () => doc });
    await monitor.runFor(0);
    expect(monitor.observations.find((o) => o.ObservationName === IMDS_HEARTBEAT)?.Value).toBe('Empty field: [ipAddress]');
  });
});

describe('stopping', () => {
  it('flushes once on STOP and ends with the stopped output', async () => {
    const monitor = startMonitor({});
    await monitor.runFor(2);
    monitor.actor.send({ type: 'STOP' });
    monitor.actor.send({ type: 'STOP' });
    await expect(toPromise(monitor.actor)).resolves.toMatchObject({ result: 'stopped', exitCode: 0 });
    expect(monitor.flushes()).toBe(1);
  });
});
