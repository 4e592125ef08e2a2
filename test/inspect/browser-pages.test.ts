/**
 * Looks at every picture bootstate draws the way a person would, in headless Chromium at 1400×1000 and at README
 * width (900 px): the README overview, the graph page, the trace of a real successful and a real failed run, and
 * the live view fed by a real run. Each page must show the whole chart after fit, no two texts of the chart may
 * overlap, every label must lie inside its box, nothing may be wider than the window, and the live status line
 * must follow the run. All of it under each font setup of browser-support.ts (only DejaVu Sans; only a wide font;
 * only a condensed one), since the charts carry their own font and must not depend on the viewer's. Screenshots
 * land in test-output/inspect/<setup>/ as artifacts.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { startInspectServer } from '../../src/inspect/live.js';
import { latestJournal } from '../../src/inspect/journal.js';
import { renderMachine } from '../../src/inspect/render.js';
import { AGENT, runAgent } from '../integration/agent.js';
import { CHROMIUM, FONT_SETUPS, chartLayout, expectFontSetup, expectLegibleChart, launchWithFonts } from './browser-support.js';

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const outRoot = path.join(repo, 'test-output', 'inspect');
const mustRun = process.platform === 'linux' && process.getuid?.() === 0;
const available = fs.existsSync(CHROMIUM);
if (mustRun && !available) {
  throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (.ci/run does) — the browser tests must not be skipped`);
}

const SIZES = [
  { name: '1400', width: 1400, height: 1000 },
  { name: '900', width: 900, height: 1000 },
] as const;

let fabric: FakeFabric;
/** The browser and the artifacts folder of the font setup whose tests run now (describe blocks run one after another). */
let browser: Browser;
let outDir = outRoot;
beforeAll(async () => {
  fabric = await startFakeFabric();
}, 60_000);
afterAll(async () => {
  await fabric?.close();
});

/** Opens a page with every request that is neither a file nor loopback aborted; returns what it tried to reach. */
async function open(url: string, size: { width: number; height: number }) {
  const context = await browser.newContext({ viewport: { width: size.width, height: size.height } });
  const outside: string[] = [];
  await context.route('**/*', (route) => {
    const target = route.request().url();
    if (/^(?:file:|https?:\/\/127\.0\.0\.1[:/])/.test(target)) return route.continue();
    outside.push(target);
    return route.abort();
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(url);
  return { page, context, outside, errors };
}

/** Writes `html` to the artifacts folder and opens it from file://. */
async function openHtml(name: string, html: string, size: { width: number; height: number }) {
  const file = path.join(outDir, `${name}.html`);
  fs.writeFileSync(file, html);
  return open(pathToFileURL(file).href, size);
}

/** Elements outside any SVG wider than the window, and the document's own horizontal overflow. */
async function tooWide(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const limit = window.innerWidth;
    const wide = [...document.body.querySelectorAll('*')]
      .filter((el) => !el.closest('svg') && el.getBoundingClientRect().right > limit + 1)
      .map((el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''} right=${Math.round(el.getBoundingClientRect().right)}`);
    if (document.documentElement.scrollWidth > limit) wide.push(`document scrollWidth=${document.documentElement.scrollWidth}`);
    return wide;
  });
}

/** The checks every chart page passes: whole chart in the window after fit, no overlapping texts, no overflow. */
async function expectReadable(page: Page, name: string, size: { width: number; height: number }) {
  const layout = await chartLayout(page);
  expect(layout, `${name}: a visible chart`).not.toBeNull();
  const { chart, texts } = layout!;
  expect(chart.left, `${name}: chart left`).toBeGreaterThanOrEqual(-1);
  expect(chart.top, `${name}: chart top`).toBeGreaterThanOrEqual(-1);
  expect(chart.right, `${name}: chart right`).toBeLessThanOrEqual(size.width + 1);
  expect(chart.bottom, `${name}: chart bottom`).toBeLessThanOrEqual(size.height + 1);
  expect(texts.length).toBeGreaterThan(5);
  await expectLegibleChart(page, name);
  expect(await tooWide(page), `${name}: wider than the window`).toEqual([]);
  await page.screenshot({ path: path.join(outDir, `${name}.png`) });
}

/** Runs the built CLI. */
function cli(args: string[]): string {
  return execFileSync(process.execPath, [AGENT, ...args], { encoding: 'utf8', env: { ...process.env, BOOTSTATE_LOG: 'warn' } });
}

describe.skipIf(!mustRun && !available).each(FONT_SETUPS)('the pictures, looked at in Chromium with $about', { timeout: 120_000 }, (setup) => {
  let close: () => Promise<void>;
  beforeAll(async () => {
    outDir = path.join(outRoot, setup.name);
    fs.mkdirSync(outDir, { recursive: true });
    ({ browser, close } = await launchWithFonts(setup));
  }, 60_000);
  afterAll(async () => close?.());

  it('README overview: the compact chart is legible at 900 px, the README shows it and links the full chart, a docs page shows a trace', async () => {
    const svg = fs.readFileSync(path.join(repo, 'docs', 'provisioning-overview.svg'), 'utf8');
    const html = `<!doctype html><html><body style="margin:0"><article style="width:900px">${svg.slice(svg.indexOf('<svg'))}</article>
<style>article svg { max-width: 100%; height: auto; }</style></body></html>`;
    const { page, context, outside } = await openHtml('readme-overview', html, { width: 900, height: 1000 });
    await expectFontSetup(page, setup);
    await page.screenshot({ path: path.join(outDir, 'readme-overview-900.png'), fullPage: true });
    const layout = (await chartLayout(page))!;
    expect(layout.chart.right).toBeLessThanOrEqual(901);
    await expectLegibleChart(page, 'readme-overview');
    expect(layout.smallest, 'smallest text height at 900 px').toBeGreaterThanOrEqual(10);
    expect(outside).toEqual([]);
    await context.close();
    const readme = fs.readFileSync(path.join(repo, 'README.md'), 'utf8');
    expect(readme).toContain('](docs/provisioning-overview.svg)');
    expect(readme).toContain('(docs/provisioning.svg)');
    expect(fs.readFileSync(path.join(repo, 'docs', 'seeing-a-run.md'), 'utf8')).toMatch(/\]\(trace-[a-z]+\.png\)/);
  });

  it('graph page: fitted, zoomable with buttons, wheel and keys, switchable to every state', async () => {
    const html = await renderMachine('provisioning', 'html');
    for (const size of SIZES) {
      const { page, context, outside, errors } = await openHtml(`graph-${size.name}`, html, size);
      await expectFontSetup(page, setup);
      await expectReadable(page, `graph-${size.name}`, size);
      const before = await page.getAttribute('svg[data-view="overview"]', 'viewBox');
      await page.click('button[data-zoom="in"]');
      expect(await page.getAttribute('svg[data-view="overview"]', 'viewBox')).not.toBe(before);
      await page.focus('#chart');
      await page.keyboard.press('0');
      expect(await page.getAttribute('svg[data-view="overview"]', 'viewBox')).toBe(before);
      await page.mouse.move(size.width / 2, 400);
      await page.mouse.wheel(0, -300);
      expect(await page.getAttribute('svg[data-view="overview"]', 'viewBox')).not.toBe(before);
      await page.keyboard.press('ArrowLeft');
      await page.click('button[data-zoom="switch"]');
      expect(await page.isVisible('svg[data-view="full"]')).toBe(true);
      const full = await chartLayout(page);
      expect(full!.chart.right).toBeLessThanOrEqual(size.width + 1);
      await expectLegibleChart(page, `graph-full-${size.name}`);
      await page.screenshot({ path: path.join(outDir, `graph-full-${size.name}.png`) });
      expect(outside).toEqual([]);
      expect(errors).toEqual([]);
      await context.close();
    }
  });

  it('trace of a real successful run and of a real failed run: the story, the path, the timeline', async () => {
    const ok = await runAgent(fabric);
    expect(ok.code).toBe(0);
    fabric.setImds({ status: 503 });
    const failed = await runAgent(fabric, { imds: { total_retry_timeout_secs: 1 } });
    fabric.setImds('ok');
    expect(failed.code).toBe(1);
    for (const [name, run] of [['ok', ok], ['failed', failed]] as const) {
      const html = path.join(outDir, `trace-${name}.html`);
      const journal = latestJournal(path.join(run.root, 'var/lib/bootstate'))!;
      const said = cli(['trace', journal, '-o', html, '--config', path.join(run.root, 'bootstate.toml')]).split('\n');
      if (name === 'failed') expect(said[0]).toMatch(/^FAILED after [\d.]+m?s: IMDS did not answer usefully within 1 s; last error: http status error \(operation timed out, exit 1\)$/);
      else expect(said[0]).toMatch(/^OK: provisioned, in [\d.]+m?s, exit 0$/);
      for (const size of SIZES) {
        const { page, context, outside, errors } = await open(pathToFileURL(html).href, size);
        expect(await page.textContent('#outcome')).toBe(said[0]);
        expect(await page.textContent('#timers')).toContain(name === 'ok' ? 'imdsTotalTimeout 5.00s' : 'imdsTotalTimeout 1.00s');
        await expectReadable(page, `trace-${name}-${size.name}`, size);
        expect(await page.$$eval('#timeline .row[data-state]', (rows) => rows.map((row) => row.getAttribute('data-state')))).toEqual(
          expect.arrayContaining(['provisioning', 'provisioning.inProgress', 'provisioning.work']),
        );
        const events = await page.$$eval('#journal tbody td:nth-child(4)', (cells) => cells.map((cell) => cell.textContent));
        expect(events.join('\n')).not.toMatch(/xstate\./);
        expect(events).toContain(name === 'ok' ? 'IMDS answered' : 'IMDS request failed');
        expect(await page.textContent('#final-state')).toBe(name === 'ok' ? 'provisioned' : 'failed');
        if (size.name === '1400') await page.screenshot({ path: path.join(outDir, `trace-${name}-full-page.png`), fullPage: true });
        expect(outside).toEqual([]);
        expect(errors).toEqual([]);
        await context.close();
      }
      fs.rmSync(run.root, { recursive: true, force: true });
    }
  });

  it('live view fed by a real run: status line, the chart lit, the path drawn, events in words', async () => {
    const server = await startInspectServer({ port: 0 });
    try {
      const first = await open(server.viewerUrl, SIZES[0]);
      await first.page.waitForFunction(() => document.getElementById('status')?.textContent?.startsWith('connected'));
      const run = await runAgent(fabric, { args: ['--inspect', server.agentUrl] });
      fs.rmSync(run.root, { recursive: true, force: true });
      expect(run.code).toBe(0);
      for (const [index, size] of SIZES.entries()) {
        const { page, context, outside, errors } = index === 0 ? first : await open(server.viewerUrl, size);
        await page.waitForFunction(() => document.getElementById('status')?.textContent === 'run of provisioning (finished)');
        expect(await page.textContent('#current')).toMatch(/^finished: provisioned, exit 0$/);
        expect(await page.$$eval('.chart-view:not([hidden]) svg[data-view="overview"] g.node.active', (nodes) => nodes.map((node) => node.getAttribute('data-state')))).toEqual(['provisioning.provisioned']);
        expect(await page.$$eval('.chart-view:not([hidden]) svg[data-view="overview"] g.visited', (nodes) => nodes.length)).toBeGreaterThan(8);
        expect(await page.$$eval('.chart-view:not([hidden]) svg[data-view="overview"] g.edge.taken', (nodes) => nodes.length)).toBeGreaterThan(4);
        const cells = await page.$$eval('#rows td', (tds) => tds.map((td) => td.textContent ?? ''));
        expect(cells).toContain('IMDS answered');
        expect(cells).toContain('Ready report accepted');
        expect(cells.join('\n')).not.toMatch(/[{}]|xstate\./);
        await expectReadable(page, `live-${size.name}`, size);
        expect(outside).toEqual([]);
        expect(errors).toEqual([]);
        await context.close();
      }
    } finally {
      await server.close();
    }
  });
});
