import { describe, expect, it } from 'vitest';
import { createMachine } from 'xstate';
import { renderChartHtml } from '../../src/inspect/chart-html.js';
import type { JournalLine } from '../../src/inspect/journal.js';
import { escapeHtml, renderTraceHtml } from '../../src/inspect/trace.js';
import { journalledRun } from './fixtures.js';

/** The attributes of the `<g>` for one state. */
function stateTag(html: string, state: string): string {
  const match = new RegExp(`<g id="[^"]+" class="(?:node|cluster)" data-state="${state.replace(/\./g, '\\.')}"[^>]*>`).exec(html);
  return match?.[0] ?? '';
}

describe('trace page', () => {
  it('marks a failed run failed, with the reason, and the end state', async () => {
    const { machine, lines } = await journalledRun({ failures: 9 });
    const html = await renderTraceHtml({ machine, journalLines: lines });
    expect(html).toContain('<body data-outcome="failed">');
    expect(html).toMatch(/<p id="outcome" class="failed" data-outcome="failed"[^>]*>FAILED after \d+ms: failed to retrieve instance metadata \(exit 1\)</);
    expect(stateTag(html, 'firstboot.failed')).toContain('data-end="failed"');
    expect(stateTag(html, 'firstboot.ready')).toContain('data-visited="false"');
  });

  it('marks a successful run ok and numbers the steps of every visited state', async () => {
    const { machine, lines } = await journalledRun({ failures: 1 });
    const html = await renderTraceHtml({ machine, journalLines: lines });
    expect(html).toContain('<body data-outcome="ok">');
    expect(stateTag(html, 'firstboot.provisioned')).toContain('data-end="ok"');
    expect(stateTag(html, 'firstboot.work.metadata.backoff')).toMatch(/data-visited="true" data-step="\d+"/);
    expect(stateTag(html, 'firstboot.work.metadata.requesting')).toMatch(/data-step="\d+ \d+ \d+"/);
    expect(stateTag(html, 'firstboot.work.metadata.validating')).toContain('data-visited="true"');
    expect(stateTag(html, 'firstboot.failed')).toContain('data-visited="false"');
    expect(html).toMatch(/data-edge="firstboot\.work\.metadata\.backoff -&#62; firstboot\.work\.metadata\.requesting on [^"]+" data-taken="true"/);
  });

  it('tabulates the journal and the time spent per state', async () => {
    const { machine, lines } = await journalledRun({ failures: 1 });
    const html = await renderTraceHtml({ machine, journalLines: lines });
    expect(html.match(/<tr data-seq="\d+">/g)).toHaveLength(lines.length);
    expect(html).toMatch(/<tr data-state="work\.metadata\.requesting"><td><code>work\.metadata\.requesting<\/code><\/td><td class="num">2<\/td>/);
    expect(html).toMatch(/<td class="time" title="\d{4}-\d\d-\d\dT[\d:.]+Z">\d\d:\d\d:\d\d\.\d{3}<\/td>/);
    expect(html).toContain('<td>retry timer (5 ms) fired</td>');
    expect(html).not.toMatch(/<td>xstate\./);
  });

  it('is self-contained: no external scripts, styles, fonts, images or links', async () => {
    const { machine, lines } = await journalledRun({ failures: 1 });
    const html = await renderTraceHtml({ machine, journalLines: lines });
    expect(html).not.toMatch(/<(?:link|img|iframe|object|embed)\b/i);
    expect(html).not.toMatch(/\b(?:src|href)\s*=/i);
    // The one url( a page may hold is the chart font's, inline as data: (src/inspect/chart-font.ts).
    const fonts = html.match(/url\(data:font\/woff;base64,[A-Za-z0-9+/=]+\)/g) ?? [];
    expect(fonts).toHaveLength(2);
    expect(html.replace(/url\(data:font\/woff;base64,[A-Za-z0-9+/=]+\)/g, '')).not.toMatch(/url\(|@import|<!DOCTYPE svg/i);
    expect(html).toContain("default-src 'none'");
    const csp = /content="([^"]+)"/.exec(html)![1]!;
    expect(csp).toContain('font-src data:;');
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+' 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).not.toContain("script-src 'unsafe-inline'");
    expect(html).not.toMatch(/\son[a-z]+\s*=/i);
  });

  it('shows a run that stopped before a final state as failed and incomplete', async () => {
    const { machine, lines } = await journalledRun({ failures: 1 });
    const html = await renderTraceHtml({ machine, journalLines: lines.slice(0, 3) });
    expect(html).toMatch(/id="outcome" class="failed" data-outcome="failed" data-complete="false">FAILED: the run ended before a final state after \d+ms \(last status active\)/);
  });

  it('escapes state names, events and reasons that look like HTML', async () => {
    const evil = '<img src=x onerror=alert(1)>';
    const machine = createMachine({ id: 'm&m', initial: 'a', states: { a: { on: { [evil]: evil } }, [evil]: { type: 'final' } } });
    const lines: JournalLine[] = [
      { t: '2024-01-01T00:00:00.000Z', machine: 'm&m', seq: 0, event: 'xstate.init', value: 'a', tags: [], transitions: [], status: 'active' },
      {
        t: '2024-01-01T00:00:01.000Z', machine: 'm&m', seq: 1, event: evil, value: evil, tags: [evil], status: 'done',
        transitions: [`m&m.a -> m&m.${evil} on ${evil}`], output: { result: 'failed', reason: evil },
      },
    ];
    const html = await renderTraceHtml({ machine, journalLines: lines });
    expect(html).not.toContain('<img');
    expect(html).toContain(escapeHtml(evil));
  });

  it('renders a chart alone as a self-contained page', async () => {
    const { machine } = await journalledRun({ failures: 0 });
    const html = await renderChartHtml(machine);
    expect(html).toContain('<svg');
    expect(html).not.toMatch(/\b(?:src|href)\s*=/i);
  });
});
