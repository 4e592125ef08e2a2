/**
 * The font the charts carry (src/inspect/chart-font.ts) is the font Graphviz laid them out with: it holds every
 * character any chart shows, no glyph of it is wider than the width Graphviz's Helvetica table gives that
 * character (ASCII exactly as wide), every standalone SVG and every page embeds it, and docs/*.svg are what
 * `npm run chart` writes today.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { instance } from '@viz-js/viz';
import * as hb from 'harfbuzzjs';
import { describe, expect, it } from 'vitest';
import { sfntOf } from '../../scripts/woff.mjs';
import { CHART_FONT_CSS, CHART_FONT_FAMILY } from '../../src/inspect/chart-font.js';
import { SYMBOLS_FACE, TEXT_FACE } from '../../src/inspect/chart-font-data.js';
import { renderMachine } from '../../src/inspect/render.js';
import { renderTraceHtml } from '../../src/inspect/trace.js';
import { journalledRun } from './fixtures.js';

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The embedded faces as HarfBuzz fonts, read back from the base64 WOFF the pages carry. */
const faces = [TEXT_FACE, SYMBOLS_FACE].map((face) => {
  const hbFace = new hb.Face(new hb.Blob(sfntOf(Buffer.from(face.woffBase64, 'base64'))));
  return { hbFace, font: new hb.Font(hbFace), unicodes: new Set(hbFace.collectUnicodes()) };
});

/** What the SVG's <text> elements say, entities decoded. */
function texts(svg: string): string[] {
  return [...svg.matchAll(/<text\b[^>]*>([^<]*)<\/text>/g)].map((match) =>
    match[1]!.replace(/&#(\d+);/g, (_, code: string) => String.fromCodePoint(Number(code))).replace(/&lt;/g, '<').replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"').replace(/&#39;|&apos;/g, "'").replace(/&amp;/g, '&'));
}

async function everyChart(): Promise<Record<string, string>> {
  const charts: Record<string, string> = {};
  for (const machine of ['provisioning', 'monitor']) {
    for (const overview of [false, true]) charts[`${machine}${overview ? ' overview' : ''}`] = await renderMachine(machine, 'svg', { overview });
  }
  return charts;
}

describe('the chart font', () => {
  it('holds every character of every chart and trace, and nothing falls back to the viewer’s fonts', async () => {
    const { machine, lines } = await journalledRun({ failures: 3 });
    const charts = { ...(await everyChart()), trace: await renderTraceHtml({ machine, journalLines: lines }) };
    const missing: string[] = [];
    for (const [name, svg] of Object.entries(charts)) {
      const chars = new Set([...texts(svg).join('')]);
      expect(chars.size, name).toBeGreaterThan(20);
      for (const char of chars) {
        if (!faces.some((face) => face.unicodes.has(char.codePointAt(0)!))) missing.push(`${name}: ${JSON.stringify(char)}`);
      }
    }
    expect(missing).toEqual([]);
    // The two faces never hold the same character, so the unicode-ranges decide alone which one draws it.
    const [text, symbols] = faces;
    expect([...symbols!.unicodes].filter((char) => char > 0x20 && text!.unicodes.has(char))).toEqual([]);
  });

  it('is no wider than Graphviz measures, glyph by glyph: ASCII exactly as wide, any other character at most as wide', async () => {
    const viz = await instance();
    const graphvizEm = (char: string) => {
      const label = char.repeat(100).replace(/[\\"]/g, (c) => `\\${c}`);
      const layout = JSON.parse(viz.renderString(`digraph { node [shape=plain, fontname="Helvetica", fontsize=100]; a [label="${label}"] }`, { format: 'json' }));
      return (layout.objects[0]._ldraw_ as { op: string; width: number }[]).find((op) => op.op === 'T')!.width / 100 / 100;
    };
    const wrong: string[] = [];
    let checked = 0;
    for (const { hbFace, font, unicodes } of faces) {
      for (const code of unicodes) {
        if (code < 0x20) continue;
        const char = String.fromCodePoint(code);
        const em = font.glyphHAdvance(font.nominalGlyph(code)!) / hbFace.upem;
        const measured = graphvizEm(char);
        const slack = 0.5 / hbFace.upem;
        if (code < 0x7f ? Math.abs(em - measured) > slack : em > measured + slack) wrong.push(`${char}: font ${em.toFixed(4)} em, Graphviz ${measured.toFixed(4)} em`);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
    expect(wrong).toEqual([]);
  });

  it('is carried by every standalone SVG, and docs/*.svg are what npm run chart writes now', async () => {
    const charts = await everyChart();
    for (const [name, svg] of Object.entries(charts)) {
      expect(svg, name).toContain(CHART_FONT_CSS);
      expect(svg, name).toMatch(new RegExp(`text\\{font-family:${CHART_FONT_FAMILY},`));
      // The style sits inside the <svg> element, so that an SVG pasted into a page (or drawn as an image) keeps it.
      expect(svg.indexOf('<style>'), name).toBeGreaterThan(svg.indexOf('<svg'));
    }
    expect(fs.readFileSync(path.join(repo, 'docs/provisioning.svg'), 'utf8')).toBe(charts['provisioning']);
    expect(fs.readFileSync(path.join(repo, 'docs/provisioning-overview.svg'), 'utf8')).toBe(charts['provisioning overview']);
    expect(fs.readFileSync(path.join(repo, 'docs/monitor.svg'), 'utf8')).toBe(charts['monitor']);
  });

  it('is carried once by the graph page and admitted by its CSP', async () => {
    const html = await renderMachine('provisioning', 'html');
    expect(html.split(CHART_FONT_CSS)).toHaveLength(2);
    expect(html).toMatch(/Content-Security-Policy" content="[^"]*font-src data:;/);
  });
});
