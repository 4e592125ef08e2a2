import { describe, expect, it } from 'vitest';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { toDot } from '../../src/inspect/dot.js';
import { buildGraph } from '../../src/inspect/graph.js';
import { overviewOf, spokenDelay } from '../../src/inspect/overview.js';
import { eventWords, guardWords, leafNames, stateName } from '../../src/inspect/words.js';
import { FIRST_BOOT, GATHERING, nodeId, STATE } from '../support/chart.js';
import { fixtureMachine } from './fixtures.js';

const delayContext = { config: DEFAULT_CONFIG, terminating: false };
/** Node ids: the machine's id, then the state's path. */
const P = nodeId(FIRST_BOOT);
const READY = nodeId(STATE.reportingReady);

describe('overview of the provisioning chart', () => {
  const full = buildGraph(provisioningMachine, { delayContext });
  const { graph, alias } = overviewOf(full);

  it('draws each retry loop as one state with a badge naming its interval and deadline', () => {
    expect(graph.nodes.get('provisioning.reportingReady')).toMatchObject({ children: [], badge: 'retries every 2 s, gives up after 20 min' });
    expect(graph.nodes.get('provisioning.reportingFailure')?.badge).toBe('retries every 2 s, gives up after 20 min');
    expect(graph.nodes.has(nodeId(STATE.reportingReadyBackoff))).toBe(false);
    expect(alias.get(nodeId(STATE.reportingReadyBackoff))).toBe(READY);
    expect(alias.get(nodeId(STATE.reportingReadyRequesting))).toBe(READY);
  });

  it('keeps the parallel regions side by side, each simple region one box listing its steps', () => {
    expect(graph.nodes.get(P)?.children).toEqual([`${P}.work`, `${P}.hostKeys`, `${P}.inProgress`]);
    // The host keys: the image's replaced, then the background types added once READY=1 was sent.
    // Made once the IMDS request has left (its head start).
    expect(graph.nodes.get(`${P}.hostKeys`)?.summary).toEqual(['→ waitingForImds', '→ replacing', '→ waiting', '→ adding']);
    expect(graph.nodes.get(`${P}.work.gathering.media`)?.summary).toEqual(['→ waitingForImds', '→ reading']);
    expect(graph.nodes.get(`${P}.work.gathering.imds`)?.summary).toEqual(['→ fetching', '⟳ retries every 2 s', 'gives up after 5 min']);
    expect(graph.nodes.get(`${P}.work.configuringOs`)?.children).toEqual(
      ['hostname', 'account', 'sshd', 'customData'].map((region) => `${P}.work.configuringOs.${region}`),
    );
    // The account creates the user, then sets the password and writes the keys side by side: one box, one line each.
    const account = `${P}.work.configuringOs.account`;
    expect(graph.nodes.get(account)).toMatchObject({ children: [], summary: ['→ creatingUser', '→ password ∥ sshKeys'] });
    expect(alias.get(`${account}.credentials.sshKeys.writing`)).toBe(account);
    // Parallel states stay drawn as their regions side by side.
    expect(graph.nodes.get(`${P}.work.gathering`)?.children).toEqual([`${P}.work.gathering.imds`, `${P}.work.gathering.media`]);
    expect(alias.get(`${P}.work.gathering.imds.fetching.backoff`)).toBe(`${P}.work.gathering.imds`);
  });

  it('shows in each state that tells systemd READY=1 that it does so', () => {
    const told = [...graph.nodes.values()].filter((node) => node.entry.includes('tellSystemdReady')).map((node) => node.id);
    // `configured`: the OS is configured (the first boot); reportingReady: a resumed report-pending VM; the ends at
    // once (alreadyProvisioned, notOnAzure, alreadyRunning) are one node.
    expect(told.sort()).toEqual([
      'provisioning.alreadyProvisioned', nodeId(STATE.configured), 'provisioning.reportingFailure', 'provisioning.reportingReady',
    ]);
    expect(toDot(graph, { compact: true }).match(/on entry: READY=1 to systemd/g)).toHaveLength(4);
  });

  it('writes the ways into reportingFailure in the states they leave, and keeps every other transition', () => {
    expect(graph.nodes.get('provisioning.starting')?.exits).toBe('VM id unreadable / config failed / marker unreadable → reportingFailure');
    expect(graph.nodes.get(P)?.exits).toBe('error / timeout → reportingFailure');
    expect(graph.edges.filter((edge) => edge.targets.includes('provisioning.reportingFailure')).map((edge) => edge.source)).toEqual([`${P}.work.gathering`, `${P}.work.checkingProxyAgent`]);
    expect(graph.edges.some((edge) => edge.source === 'provisioning.starting' && edge.targets[0] === 'provisioning.alreadyProvisioned')).toBe(true);
    // Once the OS is configured a stop leaves Ready for the next boot: those states draw their own TERMINATE edge.
    expect(graph.notes).toEqual(['TERMINATE in any other state → reportingFailure']);
    expect(graph.edges.filter((edge) => edge.label.startsWith('TERMINATE') && edge.targets[0] === 'provisioning.readyNotAccepted').map((edge) => edge.source).sort()).toEqual(
      ['provisioning.completingHostKeys', P, 'provisioning.reportingReady'].sort(),
    );
  });

  it('says conditions in short words, and names regions by their dashed border alone', () => {
    const label = (source: string, target: string) =>
      graph.edges.find((edge) => edge.source === source && edge.targets[0] === target)?.label;
    // A guarded eventless edge is its guard alone, as a guarded done edge is; an unguarded one stays `always`.
    expect(label('provisioning.starting', 'provisioning.completingHostKeys')).toBe('[report pending]');
    expect(label('provisioning.starting', 'provisioning.preprovisioned')).toBe('[waiting for reuse]');
    // The ends that report nothing are one node naming each end with its guard, reached by one edge.
    expect(label('provisioning.starting', 'provisioning.alreadyProvisioned')).toBe('always');
    expect(graph.nodes.get('provisioning.alreadyProvisioned')?.summary).toEqual([
      '[provisioned] → alreadyProvisioned', '[not on Azure] → notOnAzure', '[lock held elsewhere] → alreadyRunning',
    ]);
    expect(alias.get('provisioning.alreadyRunning')).toBe('provisioning.alreadyProvisioned');
    expect(alias.get('provisioning.notOnAzure')).toBe('provisioning.alreadyProvisioned');
    const dot = toDot(graph, { compact: true });
    expect(dot).not.toContain('(region)');
    expect(dot).toContain('label="imds\\n→ fetching');
    expect(dot).toContain('dashed border: a parallel region');
    expect(toDot(full)).toContain('(region)');
  });

  it('uses the run’s own timer values when it has them', () => {
    const run = overviewOf(buildGraph(provisioningMachine, { delayContext, timers: { imdsRetryInterval: 500, imdsTotalTimeout: 20_000 } })).graph;
    expect(run.nodes.get(`${P}.work.gathering.imds`)?.summary).toEqual(['→ fetching', '⟳ retries every 500 ms', 'gives up after 20 s']);
    expect(toDot(run, { compact: true })).toContain('gives up after 20 s');
  });
});

describe('words', () => {
  it('names events as people say them', () => {
    expect(eventWords('xstate.done.actor.imds')).toBe('IMDS answered');
    expect(eventWords('xstate.done.actor.readyReport')).toBe('Ready report accepted');
    expect(eventWords('xstate.error.actor.somethingElse')).toBe('somethingElse failed');
    expect(eventWords(`xstate.after.imdsRetryInterval.${P}.work`, { imdsRetryInterval: 2000 })).toBe('retry timer (2 s) fired');
    expect(eventWords(`xstate.after.imdsTotalTimeout.${P}.work`, { imdsTotalTimeout: 300_000 })).toBe('deadline (5 min) reached: imdsTotalTimeout');
    expect(eventWords(`xstate.done.state.${nodeId(GATHERING)}`)).toBe('gathering finished');
    expect(eventWords('TERMINATE')).toBe('SIGTERM received');
  });

  it('names states one way: the path below the machine, as the journal’s values spell them', () => {
    expect(stateName('provisioning', nodeId(STATE.validating))).toBe(STATE.validating);
    expect(leafNames({ provisioning: { inProgress: 'done', work: 'validating' } })).toEqual([STATE.inProgressDone, STATE.validating]);
    expect([500, 2000, 300_000].map(spokenDelay)).toEqual(['500 ms', '2 s', '5 min']);
    expect(['markerProvisioned', 'configFailed', 'versionsAvailable'].map(guardWords)).toEqual(['provisioned', 'config failed', 'versions available']);
  });

  it('folds the fixture’s retry loop into the box of its region', () => {
    const fixture = buildGraph(fixtureMachine({ failures: 0 }));
    expect(overviewOf(fixture).graph.nodes.get('firstboot.work.metadata')?.summary).toEqual(['→ requesting', '⟳ retries every 5 ms', '→ validating']);
  });
});
