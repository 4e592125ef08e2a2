import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createActor, fromPromise, toPromise, type AnyStateMachine, type AnyStateNode } from 'xstate';
import { monitorMachine, monitorInput } from '../../machines/monitor.js';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { renderChartHtml } from '../../src/inspect/chart-html.js';
import { toDot } from '../../src/inspect/dot.js';
import { buildGraph } from '../../src/inspect/graph.js';
import { toMermaid } from '../../src/inspect/mermaid.js';
import { renderSvg } from '../../src/inspect/svg.js';
import { createJournal, edgeKey, readJournal } from '../../src/inspect/journal.js';
import { renderTraceHtml } from '../../src/inspect/trace.js';
import { SECRET } from './fixtures.js';

const machines: Array<[string, AnyStateMachine, unknown]> = [
  ['provisioning', provisioningMachine, { config: DEFAULT_CONFIG, terminating: false }],
  ['monitor', monitorMachine, monitorInput(DEFAULT_CONFIG.monitor, false)],
];

/** Every state node of a machine. */
function allNodes(node: AnyStateNode): AnyStateNode[] {
  return [node, ...Object.values(node.states as Record<string, AnyStateNode>).flatMap(allNodes)];
}

describe.each(machines)('the %s machine', (name, machine, delayContext) => {
  const graph = buildGraph(machine, { delayContext });

  it('has every transition of every state node in its graph, under its journal key', () => {
    const expected = allNodes(machine.root).flatMap((node) =>
      [...[...node.transitions.values()].flat(), ...(node.always ?? [])].map((transition) => edgeKey(node, transition)),
    );
    expect(expected.length).toBeGreaterThan(5);
    expect(graph.edges.map((edge) => edge.key).sort()).toEqual(expected.sort());
  });

  it('renders DOT with clusters, double-bordered finals and labelled delays, and renders it to SVG', async () => {
    const dot = toDot(graph);
    expect(dot).toContain('"::start" -> ');
    expect(dot).toMatch(/subgraph "cluster_[\w.]+" \{/);
    const finals = [...graph.nodes.values()].filter((node) => node.type === 'final');
    expect(finals.length).toBeGreaterThan(0);
    for (const final of finals) expect(dot).toMatch(new RegExp(`"${final.id.replace(/\./g, '\\.')}" \\[[^\\n]*peripheries=2`));
    expect(dot).toMatch(/label="after \d+(?:ms|s|min|h)"/);
    const svg = await renderSvg(dot);
    expect(svg).toContain('<svg');
  });

  it('renders Mermaid and a self-contained chart page', async () => {
    expect(toMermaid(graph)).toMatch(/^stateDiagram-v2\n/);
    const html = await renderChartHtml(machine, { delayContext });
    expect(html).not.toMatch(/\b(?:src|href)\s*=/i);
  });
});

describe('a real provisioning run in the trace', () => {
  it('journals and draws a run whose every actor fails, marked failed, with no secret anywhere', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-real-'));
    const config = structuredClone(DEFAULT_CONFIG);
    config.imds.retry_interval_secs = 0.01;
    config.imds.total_retry_timeout_secs = 0.1;
    config.wireserver.retry_interval_secs = 0.01;
    config.wireserver.total_retry_timeout_secs = 0.1;
    const stubs = Object.keys(provisioningMachine.implementations.actors)
      // The root-level writers are callbacks that never fail (src/provision/actors.ts); every other actor fails.
      .filter((actor) => actor !== 'kvpWriter')
      .map((actor) => [actor, fromPromise(async () => Promise.reject(new Error(`down, password=${SECRET}`)))]);
    const journal = createJournal({ dir, vmId: 'vm-real' });
    const actor = createActor(provisioningMachine.provide({ actors: Object.fromEntries(stubs) as never }), {
      input: { config },
      inspect: journal.inspect,
    });
    actor.start();
    const output = (await toPromise(actor)) as { result: string };
    journal.close();
    expect(output.result).toBe('failed');
    const lines = readJournal(journal.path);
    const html = await renderTraceHtml({ machine: provisioningMachine, journalLines: lines });
    expect(html).toContain('<body data-outcome="failed">');
    expect(html).toMatch(/data-state="provisioning\.provisioning\.work\.gathering\.media\.waitingForImds" data-visited="true"/);
    expect(fs.readFileSync(journal.path).includes(SECRET)).toBe(false);
    expect(html.includes(SECRET)).toBe(false);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
