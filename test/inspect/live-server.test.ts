import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startInspectServer, startLiveInspector, type InspectServer } from '../../src/inspect/live.js';
import { IMDS, nodeId } from '../support/chart.js';
import { fixtureMachine, runMachine } from './fixtures.js';

let server: InspectServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Connects a viewer (with a browser-like Origin) and collects what it is sent. */
async function viewer(origin: string): Promise<{ messages: string[]; ws: WebSocket; refused: boolean }> {
  const ws = new WebSocket(`${server!.agentUrl}/view`, { headers: { origin } });
  const messages: string[] = [];
  ws.on('message', (data) => messages.push((data as Buffer).toString('utf8')));
  const refused = await new Promise<boolean>((resolve) => {
    ws.on('open', () => resolve(false));
    ws.on('error', () => resolve(true));
  });
  return { messages, ws, refused };
}

const waitFor = async (check: () => boolean): Promise<void> => {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
};

describe('inspect server', () => {
  it('listens on 127.0.0.1 unless told otherwise', async () => {
    server = await startInspectServer({ port: 0 });
    expect(server.host).toBe('127.0.0.1');
    expect(server.agentUrl).toBe(`ws://127.0.0.1:${server.port}`);
  });

  it('relays an agent run to a viewer that connects afterwards, replaying it in order', async () => {
    server = await startInspectServer({ port: 0 });
    const live = startLiveInspector(server.agentUrl);
    await runMachine(fixtureMachine({ failures: 1 }), [live.inspect]);
    await live.stop();
    const late = await viewer(`http://127.0.0.1:${server.port}`);
    expect(late.refused).toBe(false);
    await waitFor(() => late.messages.some((message) => message.includes('"provisioned"')));
    const parsed = late.messages.map((message) => JSON.parse(message));
    expect(parsed[0]).toMatchObject({ type: '@xstate.actor', name: 'firstboot' });
    expect(parsed.at(-1)).toMatchObject({ type: '@xstate.snapshot', snapshot: { value: 'provisioned', status: 'done' } });
    late.ws.close();
  });

  it('serves a self-contained viewer page and a Stately bridge page', async () => {
    server = await startInspectServer({ port: 0 });
    const page = await (await fetch(server.viewerUrl)).text();
    expect(page).toContain("default-src 'none'");
    expect(page).toMatch(/script-src 'sha256-[^']+' 'sha256-[^']+'; connect-src ws: wss:/);
    expect(page).not.toContain("'unsafe-inline'; connect-src");
    expect(page).toMatch(/<section class="chart-view" data-machine="provisioning" data-root="provisioning"/);
    expect(page).toMatch(/<section class="chart-view" data-machine="monitor" data-root="monitor"/);
    expect(page).toContain(`data-state="${nodeId(IMDS)}"`);
    expect(page).not.toMatch(/\b(?:src|href)\s*=/i);
    expect(await (await fetch(`${server.viewerUrl}stately`)).text()).toContain('https://stately.ai/inspect');
    expect((await fetch(`${server.viewerUrl}nope`)).status).toBe(404);
  });

  it('refuses viewers from another origin and agents that come from a browser', async () => {
    server = await startInspectServer({ port: 0 });
    expect((await viewer('https://evil.example')).refused).toBe(true);
    const agent = new WebSocket(server.agentUrl, { headers: { origin: 'https://evil.example' } });
    const refused = await new Promise<boolean>((resolve) => {
      agent.on('open', () => resolve(false));
      agent.on('error', () => resolve(true));
    });
    expect(refused).toBe(true);
  });
});
