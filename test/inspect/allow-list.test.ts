import { describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { toDot } from '../../src/inspect/dot.js';
import { buildGraph } from '../../src/inspect/graph.js';
import { toMermaid } from '../../src/inspect/mermaid.js';
import { renderSvg } from '../../src/inspect/svg.js';
import { startLiveInspector } from '../../src/inspect/live.js';
import { projectOutput } from '../../src/inspect/projection.js';
import { renderTraceHtml } from '../../src/inspect/trace.js';
import { SECRET, journalledRun, runMachine } from './fixtures.js';

/** Every representation of a string a leak could take: raw, JSON-escaped, HTML-escaped, base64. */
const forms = [SECRET, JSON.stringify(SECRET).slice(1, -1), Buffer.from(SECRET).toString('base64'), SECRET.slice(0, 12)];
const leaks = (bytes: Buffer | string): string[] => forms.filter((form) => Buffer.from(bytes).includes(form));

describe('allow-list', () => {
  it('keeps a secret in context, event payloads, actor results, errors and output out of every journal byte', async () => {
    const ok = await journalledRun({ failures: 2 }, [{ type: 'NUDGE', token: SECRET }]);
    const failed = await journalledRun({ failures: 9 }, [{ type: 'NUDGE', token: SECRET }]);
    expect((ok.run.output as { password: string }).password).toBe(SECRET);
    expect(leaks(ok.bytes)).toEqual([]);
    expect(leaks(failed.bytes)).toEqual([]);
  });

  it('keeps it out of the trace page, DOT, Mermaid and SVG', async () => {
    const { machine, lines } = await journalledRun({ failures: 9 }, [{ type: 'NUDGE', token: SECRET }]);
    const graph = buildGraph(machine);
    const dot = toDot(graph);
    expect(leaks(dot)).toEqual([]);
    expect(leaks(toMermaid(graph))).toEqual([]);
    expect(leaks(await renderSvg(dot))).toEqual([]);
    expect(leaks(await renderTraceHtml({ machine, journalLines: lines }))).toEqual([]);
  });

  it('keeps it out of every byte the live inspector sends', async () => {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => wss.on('listening', resolve));
    const received: Buffer[] = [];
    wss.on('connection', (ws) => ws.on('message', (data) => received.push(Buffer.from(data as Buffer))));
    const live = startLiveInspector(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`);
    const { machine } = await journalledRun({ failures: 0 });
    await runMachine(machine, [live.inspect], [{ type: 'NUDGE', token: SECRET }]);
    await live.stop();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    expect(received.length).toBeGreaterThan(5);
    expect(leaks(Buffer.concat(received))).toEqual([]);
  });

  it('passes only known reasons and codes, code-like results and integer exit codes', () => {
    expect(projectOutput({ result: 'failed', reason: 'invalid username', code: 'INVALID_USERNAME', exitCode: 78, password: SECRET })).toEqual({
      result: 'failed', reason: 'invalid username', code: 'INVALID_USERNAME', exitCode: 78,
    });
    expect(projectOutput({ result: SECRET, reason: `bad password ${SECRET}`, code: SECRET, exitCode: '1' })).toEqual({ reason: '(unlisted reason)' });
    expect(projectOutput({ result: 'ok' }, { output: ['exitCode'] })).toEqual({});
    expect(projectOutput(SECRET)).toBeUndefined();
  });
});
