/**
 * Chromium for the browser tests, under font setups that are hostile to a chart laid out with Helvetica's widths
 * (docs/architecture.md#the-pictures): fontconfig is given a fonts.conf of its own whose only <dir> holds one font
 * file, so every family a page names falls back to it. The files come from Debian's font packages that
 * scripts/test-packages.txt names. Also the checks every chart passes: no two texts overlap, every label inside its
 * box.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as hb from 'harfbuzzjs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';

export const CHROMIUM = '/usr/bin/chromium';
const DEJAVU = '/usr/share/fonts/truetype/dejavu';

export interface FontSetup { name: string; about: string; file: string }

/** The fonts the pages are looked at with: each the only font on the machine, as far as Chromium can tell. */
export const FONT_SETUPS: FontSetup[] = [
  { name: 'dejavu', about: 'only DejaVu Sans (wider than Helvetica)', file: `${DEJAVU}/DejaVuSans.ttf` },
  { name: 'wide', about: 'only DejaVu Sans Mono (every character as wide as an m)', file: `${DEJAVU}/DejaVuSansMono.ttf` },
  { name: 'condensed', about: 'only DejaVu Sans Condensed', file: `${DEJAVU}/DejaVuSansCondensed.ttf` },
];

/** Launches Chromium with fontconfig seeing only `setup`'s font; the returned cleanup closes it and removes the folder. */
export async function launchWithFonts(setup: FontSetup): Promise<{ browser: Browser; close: () => Promise<void> }> {
  if (!fs.existsSync(setup.file)) throw new Error(`${setup.file} is missing: scripts/test-packages.txt names its package (npm test's pretest installs it)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bootstate-fonts-${setup.name}-`));
  fs.mkdirSync(path.join(dir, 'fonts'));
  fs.copyFileSync(setup.file, path.join(dir, 'fonts', path.basename(setup.file)));
  const conf = path.join(dir, 'fonts.conf');
  fs.writeFileSync(conf, `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>${path.join(dir, 'fonts')}</dir>
  <cachedir>${path.join(dir, 'cache')}</cachedir>
</fontconfig>
`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    env: { ...process.env, FONTCONFIG_FILE: conf, FONTCONFIG_PATH: dir },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  return {
    browser,
    close: async () => {
      await browser.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The advance of `text` in `file` at `px` pixels, added up glyph by glyph (no kerning), as HarfBuzz reads the font. */
function advanceOf(file: string, text: string, px: number): number {
  const face = new hb.Face(new hb.Blob(fs.readFileSync(file)));
  const font = new hb.Font(face);
  return ([...text].reduce((sum, char) => sum + font.glyphHAdvance(font.nominalGlyph(char.codePointAt(0)!)!), 0) / face.upem) * px;
}

/**
 * Proves the page sees the setup's font and no other: serif, sans-serif, monospace and Helvetica all draw a test
 * string exactly as wide as the setup's font file says, and the page's chart font has loaded from its data: URI.
 */
export async function expectFontSetup(page: Page, setup: FontSetup): Promise<void> {
  const sample = 'Helvetica mmm iii WWW';
  const widths = await page.evaluate(async (text) => {
    await document.fonts.ready;
    const context = new OffscreenCanvas(10, 10).getContext('2d')!;
    context.fontKerning = 'none';
    context.textRendering = 'geometricPrecision';
    const width = (family: string) => {
      context.font = `100px ${family}`;
      return context.measureText(text).width;
    };
    return { serif: width('serif'), sans: width('sans-serif'), mono: width('monospace'), helvetica: width('Helvetica') };
  }, sample);
  const expected = advanceOf(setup.file, sample, 100);
  for (const [family, width] of Object.entries(widths)) expect(Math.abs(width - expected), `${setup.name}: ${family} is drawn in ${path.basename(setup.file)}`).toBeLessThan(1);
  const chartFont = await page.evaluate(async () => {
    await document.fonts.ready;
    return [...document.fonts].filter((face) => face.family.replace(/"/g, '') === 'bootstate-chart').map((face) => face.status);
  });
  expect(chartFont, `${setup.name}: the chart font's faces`).toContain('loaded');
}

export interface Box { text: string; left: number; top: number; right: number; bottom: number }

/** What a reader sees of the visible chart: its box, every text box in it, and the smallest rendered text. */
export async function chartLayout(page: Page) {
  return page.evaluate(async () => {
    await document.fonts.ready;
    const svg = [...document.querySelectorAll('svg')].find((candidate) => candidate.getBoundingClientRect().width > 0 && !candidate.closest('[hidden]'));
    if (!svg) return null;
    const graph = svg.querySelector('g.graph') ?? svg;
    const box = (el: Element) => {
      const r = el.getBoundingClientRect();
      return { text: el.textContent ?? '', left: r.left, top: r.top, right: r.right, bottom: r.bottom };
    };
    const texts = [...svg.querySelectorAll('text')].filter((text) => (text.textContent ?? '').trim() !== '').map(box);
    // A state's or a region's label must lie inside the shape drawn around it: Graphviz sized that shape for it.
    const outside: string[] = [];
    for (const group of svg.querySelectorAll('g.node, g.cluster')) {
      const shape = group.querySelector(':scope > path, :scope > polygon, :scope > ellipse');
      if (!shape) continue;
      const frame = shape.getBoundingClientRect();
      for (const text of group.querySelectorAll(':scope > text, :scope > g text')) {
        const r = text.getBoundingClientRect();
        if (!(text.textContent ?? '').trim()) continue;
        if (r.left < frame.left - 0.5 || r.right > frame.right + 0.5 || r.top < frame.top - 0.5 || r.bottom > frame.bottom + 0.5) {
          outside.push(`"${text.textContent}" [${Math.round(r.left)}–${Math.round(r.right)}] outside [${Math.round(frame.left)}–${Math.round(frame.right)}]`);
        }
      }
    }
    return { chart: box(graph), texts, outside, smallest: Math.min(...texts.map((text) => text.bottom - text.top)) };
  });
}

/** Pairs of chart texts whose boxes overlap by more than a pixel each way. */
export function overlaps(texts: Box[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i]!;
      const b = texts[j]!;
      const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (x > 1 && y > 1) out.push(`"${a.text}" × "${b.text}"`);
    }
  }
  return out;
}

/** The visible chart is legible: no two of its texts overlap and every label lies inside its box. */
export async function expectLegibleChart(page: Page, name: string) {
  const layout = await chartLayout(page);
  expect(layout, `${name}: a visible chart`).not.toBeNull();
  expect(layout!.texts.length, `${name}: texts`).toBeGreaterThan(5);
  expect(overlaps(layout!.texts), `${name}: overlapping texts`).toEqual([]);
  expect(layout!.outside, `${name}: labels outside their boxes`).toEqual([]);
  return layout!;
}
