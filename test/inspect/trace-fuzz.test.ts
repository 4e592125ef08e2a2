/**
 * The trace page against hostile journals: every field of every line (including `seq`, timestamps, tags,
 * transitions, output and timers) filled with markup, quotes, control characters or the wrong type. Whatever the
 * journal holds, the page may contain only the elements and attributes the renderer itself writes, and its
 * scripts must stay the ones its CSP admits by hash.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderTraceHtml } from '../../src/inspect/trace.js';
import { fixtureMachine } from './fixtures.js';

const machine = fixtureMachine({ failures: 1 });

const PAYLOADS = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "' onmouseover='x", '</style><svg onload=1>',
  '<!--', ']]>', '&#60;b&#62;', '\u0000\u2028', '<a href="javascript:x">'];
const hostile = fc.oneof(fc.constantFrom(...PAYLOADS), fc.string({ unit: fc.constantFrom('<', '>', '"', "'", '&', '=', '/', 'a', ' ', 'é') }));
const anything = fc.oneof(hostile, fc.integer(), fc.constant(null), fc.array(hostile, { maxLength: 3 }), fc.dictionary(hostile, hostile, { maxKeys: 3 }));
const line = fc.record(
  {
    t: fc.oneof(hostile, fc.date({ noInvalidDate: true }).map((d) => d.toISOString())),
    machine: anything,
    seq: fc.oneof(fc.nat(), hostile),
    event: fc.oneof(hostile, fc.constantFrom('xstate.init', 'xstate.done.actor.imds', `xstate.after.${PAYLOADS[1]}.x`)),
    value: fc.oneof(hostile, fc.constantFrom('marker', 'failed'), fc.dictionary(hostile, hostile, { maxKeys: 2 })),
    tags: fc.oneof(fc.array(hostile, { maxLength: 3 }), anything),
    transitions: fc.oneof(fc.array(hostile, { maxLength: 3 }), fc.constant([`firstboot.marker -> firstboot.work on ${PAYLOADS[0]}`])),
    status: fc.oneof(hostile, fc.constantFrom('active', 'done')),
    output: fc.oneof(anything, fc.record({ result: hostile, reason: hostile, cause: hostile, code: hostile, exitCode: fc.oneof(fc.integer(), hostile) })),
    timers: fc.oneof(anything, fc.dictionary(hostile, fc.oneof(fc.nat(), hostile), { maxKeys: 3 })),
  },
  { requiredKeys: [] },
);

/** Every element name and attribute name in a page, outside the bodies of its scripts and styles. */
function markup(html: string): { elements: Set<string>; attributes: Set<string>; scripts: string[] } {
  const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((match) => match[1]!);
  const stripped = html.replace(/<(script|style)([^>]*)>[\s\S]*?<\/\1>/g, '<$1$2>');
  const elements = new Set<string>();
  const attributes = new Set<string>();
  for (const tag of stripped.matchAll(/<([a-zA-Z][\w:-]*)((?:[^>"']|"[^"]*"|'[^']*')*)>/g)) {
    elements.add(tag[1]!.toLowerCase());
    for (const attribute of tag[2]!.matchAll(/\s([^\s=/>"']+)(?:=(?:"[^"]*"|'[^']*'|[^\s>]*))?/g)) attributes.add(attribute[1]!.toLowerCase());
  }
  return { elements, attributes, scripts };
}

const benign = markup(
  await renderTraceHtml({
    machine,
    journalLines: [
      { t: '2024-01-01T00:00:00.000Z', machine: 'firstboot', seq: 0, event: 'xstate.init', value: 'marker', tags: ['NotReady/Provisioning'], transitions: [], status: 'active', timers: { retryInterval: 5 } },
      { t: '2024-01-01T00:00:01.000Z', machine: 'firstboot', seq: 1, event: 'xstate.error.actor.marker', value: 'failed', tags: [], transitions: ['firstboot.marker -> firstboot.failed on xstate.error.actor.marker', 'firstboot.marker -> (internal) on NUDGE'], status: 'done', output: { result: 'failed', reason: 'r', exitCode: 1, cause: 'c' } },
    ],
  }),
);

describe('trace page with a hostile journal', () => {
  it('contains only the elements and attributes the renderer writes, and only its own scripts', async () => {
    const csp = (html: string) => /script-src ([^;"]+)/.exec(html)![1]!;
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 6 }), async (lines) => {
        const html = await renderTraceHtml({ machine, journalLines: lines, title: PAYLOADS[1] });
        const found = markup(html);
        expect([...found.elements].filter((name) => !benign.elements.has(name))).toEqual([]);
        expect([...found.attributes].filter((name) => !benign.attributes.has(name))).toEqual([]);
        expect(found.scripts).toEqual(benign.scripts);
        const hashes = found.scripts.map((script) => `'sha256-${createHash('sha256').update(script).digest('base64')}'`);
        expect(csp(html).trim()).toBe(hashes.join(' '));
        expect(html).not.toMatch(/<\/?(?:img|iframe|object|embed|a|link|meta http-equiv="refresh")\b/i);
      }),
      { numRuns: 40 },
    );
  }, 120_000);

  it('escapes the step number of a line whose seq is not a number', async () => {
    const html = await renderTraceHtml({
      machine,
      journalLines: [{ t: '2024-01-01T00:00:00.000Z', machine: 'firstboot', seq: '"><b>', event: 'x', value: 'marker', tags: [], transitions: [], status: 'active' }],
    });
    expect(html).not.toContain('"><b>');
    expect(html).toContain('<tr data-seq="0">');
  });
});
