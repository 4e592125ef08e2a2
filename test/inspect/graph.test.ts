import { describe, expect, it } from 'vitest';
import { toDot } from '../../src/inspect/dot.js';
import { buildGraph, formatDelay } from '../../src/inspect/graph.js';
import { toMermaid } from '../../src/inspect/mermaid.js';
import { renderSvg } from '../../src/inspect/svg.js';
import { createJournal, readJournal } from '../../src/inspect/journal.js';
import { fixtureMachine, runMachine } from './fixtures.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const machine = fixtureMachine({ failures: 1 });
const graph = buildGraph(machine);
const dot = toDot(graph);

/** The DOT statement of one state node. */
function nodeLine(id: string): string {
  return dot.split('\n').find((line) => line.trim().startsWith(`"${id}" [`)) ?? '';
}

/** The DOT statements of edges whose id encodes the given edge key fragment. */
function edgeLines(label: string): string[] {
  return dot.split('\n').filter((line) => line.includes(' -> ') && line.includes(`label="${label}"`));
}

describe('machine graph', () => {
  it('lists every state node with its type, tags, parent and invokes', () => {
    expect([...graph.nodes.keys()]).toContain('firstboot.work.metadata.backoff');
    expect(graph.nodes.get('firstboot.work')).toMatchObject({ type: 'parallel', tags: ['NotReady/Provisioning'], parent: 'firstboot' });
    expect(graph.nodes.get('firstboot.work.metadata')).toMatchObject({ type: 'compound', initial: 'firstboot.work.metadata.requesting' });
    expect(graph.nodes.get('firstboot.work.metadata.requesting')?.invokes).toEqual(['imds (fetchMetadata)']);
  });

  it('lists events, delays, invoke outcomes, state onDone and always as labelled edges', () => {
    const byLabel = Object.fromEntries(graph.edges.map((edge) => [edge.label, edge]));
    expect(byLabel['TERMINATE']).toMatchObject({ kind: 'event', source: 'firstboot', targets: ['firstboot.failed'] });
    expect(byLabel['after 2s']).toMatchObject({ kind: 'after', source: 'firstboot.work', delay: { name: 'totalDeadline', ms: 2000 } });
    expect(byLabel['after 5ms']).toMatchObject({ kind: 'after', delay: { name: 'retryInterval', ms: 5 } });
    expect(byLabel['error: imds [canRetry]']).toMatchObject({ kind: 'error', targets: ['firstboot.work.metadata.backoff'] });
    expect(byLabel['done: imds']).toMatchObject({ kind: 'done' });
    expect(byLabel['onDone']).toMatchObject({ source: 'firstboot.work', targets: ['firstboot.ready'] });
    expect(byLabel['always']).toMatchObject({ kind: 'always', source: 'firstboot.work.metadata.validating' });
    expect(byLabel['NUDGE']).toMatchObject({ targets: [] });
  });

  it('names every transition a run takes with a key the graph knows', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-graph-'));
    const journal = createJournal({ dir, vmId: 'vm' });
    await runMachine(fixtureMachine({ failures: 1 }), [journal.inspect], [{ type: 'NUDGE', token: 'x' }]);
    journal.close();
    const keys = new Set(graph.edges.map((edge) => edge.key));
    const taken = readJournal(journal.path).flatMap((line) => line.transitions);
    expect(taken.length).toBeGreaterThan(5);
    expect(taken.filter((key) => !keys.has(key))).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('draws compound and parallel states as clusters, parallel regions dashed, top to bottom from a start dot', () => {
    expect(dot).toContain('rankdir=TB');
    expect(dot).toContain('subgraph "cluster_firstboot.work" {');
    expect(dot).toMatch(/label="work \(parallel\)\\l"/);
    expect(dot).toMatch(/subgraph "cluster_firstboot.work.metadata" \{\n\s+id="[^"]+"; label="metadata \(region\)\\l"; labeljust=l; margin=10;\n\s+style="dashed,rounded,filled"/);
    expect(dot).toContain('"::start" -> "firstboot.marker"');
    expect(dot).toContain('{ rank=max; "firstboot.provisioned"; "firstboot.failed"; }');
  });

  it('double-borders final states and shows health tags as fill colours with a legend', () => {
    expect(nodeLine('firstboot.failed')).toContain('peripheries=2');
    expect(nodeLine('firstboot.failed')).toContain('fillcolor="#fde2e1"');
    expect(nodeLine('firstboot.provisioned')).toContain('fillcolor="#d8f3dc"');
    expect(nodeLine('firstboot.work.metadata.requesting')).toContain('fillcolor="#fff1c9"');
    // The legend is the graph's own label, under the chart, set after every cluster so that none inherits it.
    expect(dot).toMatch(/\n {2}label=<<TABLE[^\n]*health NotReady\/ProvisioningFailed[^\n]*health Ready[^\n]*health NotReady\/Provisioning[^\n]*dashed border: a parallel region[^\n]*; labelloc=b; labeljust=l;\n\}\n$/);
    expect(nodeLine('firstboot.work.report.sent')).toContain('peripheries=2');
    expect(nodeLine('firstboot.ready')).not.toContain('peripheries');
  });

  it('dashes error transitions, labels delays with their value and leaves clusters from the bottom', () => {
    expect(edgeLines('error: imds [canRetry]')[0]).toContain('style="dashed"');
    expect(edgeLines('done: imds')[0]).not.toContain('dashed');
    expect(edgeLines('after 5ms')).toHaveLength(1);
    expect(edgeLines('after 2s')[0]).toContain('ltail="cluster_firstboot.work"');
    expect(edgeLines('after 2s')[0]).toMatch(/^\s+"firstboot\.work::exit" -> /);
  });

  it('holds what follows a top-level block below it, and keeps errors into final states in the ranking', () => {
    expect(dot).toContain('"firstboot.work::exit" -> "firstboot.ready" [style=invis];');
    expect(dot).toContain('"firstboot.work::exit" -> "firstboot.failed" [style=invis];');
    expect(dot).not.toMatch(/"firstboot\.work::exit" -> "firstboot\.work\./);
    expect(edgeLines('error: imds')[0]).not.toContain('constraint=false');
    expect(edgeLines('error: imds [canRetry]')[0]).toContain('constraint=false');
  });

  it('formats delays the way people say them', () => {
    expect([500, 2000, 1500, 120_000, 90_000, 7_200_000].map(formatDelay)).toEqual(['500ms', '2s', '1.5s', '2min', '90s', '2h']);
  });

  it('writes Mermaid with nested composites, parallel separators, initial and final markers', () => {
    const text = toMermaid(graph);
    expect(text.startsWith('stateDiagram-v2\n')).toBe(true);
    expect(text).toContain('state "work (NotReady/Provisioning)" as s_firstboot_work {');
    expect(text).toMatch(/s_firstboot_work_report \{[\s\S]*\n\s+--\n\s+state "metadata" as s_firstboot_work_metadata \{/);
    expect(text).toContain('[*] --> s_firstboot_work_metadata_requesting');
    expect(text).toContain('s_firstboot_failed --> [*]');
    expect(text).toContain('s_firstboot_work_metadata_backoff --> s_firstboot_work_metadata_requesting : after 5ms');
  });

  it('renders SVG offline with a group per state', async () => {
    const svg = await renderSvg(dot);
    expect(svg).toContain('<svg');
    for (const id of graph.nodes.keys()) expect(svg).toContain(`>${id.split('.').pop()}`);
    expect(svg).toContain('stroke-dasharray');
  });
});
