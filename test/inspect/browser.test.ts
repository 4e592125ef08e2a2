/**
 * The trace page of a journalled run in headless Chromium: its story, its path, its hover, and a legible chart
 * (no overlapping texts, every label inside its box) under each font setup of browser-support.ts. Screenshots
 * land in test-output/inspect/<setup>/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderTraceHtml } from '../../src/inspect/trace.js';
import { CHROMIUM, FONT_SETUPS, expectFontSetup, expectLegibleChart, launchWithFonts } from './browser-support.js';
import { journalledRun } from './fixtures.js';

const outRoot = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'test-output', 'inspect');
const mustRun = process.platform === 'linux' && process.getuid?.() === 0;
const available = fs.existsSync(CHROMIUM);

if (mustRun && !available) {
  throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (.ci/run does) — the trace browser test must not be skipped`);
}

/** The browser and the artifacts folder of the font setup whose tests run now (describe blocks run one after another). */
let browser: Browser;
let outDir = outRoot;

/** Opens a trace page from file:// with every non-file request aborted; returns the page and what it tried to fetch. */
async function openTrace(name: string, html: string) {
  const file = path.join(outDir, `${name}.html`);
  fs.writeFileSync(file, html);
  const context = await browser.newContext({ offline: true, viewport: { width: 1400, height: 1000 } });
  const attempted: string[] = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:')) return route.continue();
    attempted.push(url);
    return route.abort();
  });
  context.on('request', (request) => {
    if (!request.url().startsWith('file:')) attempted.push(request.url());
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(pathToFileURL(file).href);
  return { page, context, attempted, errors };
}

/** The visited state paths the page exposes, in document order. */
async function visitedStates(page: import('playwright-core').Page): Promise<string[]> {
  return page.$$eval('g[data-visited="true"]', (nodes) => nodes.map((node) => node.getAttribute('data-state') ?? ''));
}

describe.skipIf(!mustRun && !available).each(FONT_SETUPS)('trace page in headless Chromium with $about', { timeout: 60_000 }, (setup) => {
  let close: () => Promise<void>;
  beforeAll(async () => {
    outDir = path.join(outRoot, setup.name);
    fs.mkdirSync(outDir, { recursive: true });
    ({ browser, close } = await launchWithFonts(setup));
  }, 60_000);
  afterAll(async () => close?.());

  it('shows a failed run: path through the retries to failed, marked failed', async () => {
    const { machine, lines } = await journalledRun({ failures: 9 });
    const { page, context, attempted, errors } = await openTrace('failed-run', await renderTraceHtml({ machine, journalLines: lines }));
    expect(await page.getAttribute('#outcome', 'data-outcome')).toBe('failed');
    expect(await page.textContent('#outcome')).toMatch(/^FAILED after /);
    expect(await page.isVisible('#outcome')).toBe(true);
    await expectFontSetup(page, setup);
    await expectLegibleChart(page, 'failed-run overview');
    const visited = await visitedStates(page);
    expect(visited).toEqual(expect.arrayContaining(['firstboot.marker', 'firstboot.work.metadata.requesting', 'firstboot.work.metadata.backoff', 'firstboot.failed']));
    expect(visited).not.toContain('firstboot.ready');
    expect(await page.getAttribute('g[data-state="firstboot.failed"]', 'data-end')).toBe('failed');
    expect(await page.textContent('#durations tr[data-state="work.metadata.requesting"] td:nth-child(2)')).toBe('4');
    expect(await page.$$eval('#journal tbody tr', (rows) => rows.length)).toBe(lines.length);
    await page.click('button[data-zoom="switch"]');
    await expectLegibleChart(page, 'failed-run full chart');
    await page.hover('#journal tbody tr:nth-child(4)');
    expect(await page.$$eval('g.focus', (nodes) => nodes.length)).toBeGreaterThan(0);
    await page.screenshot({ path: path.join(outDir, 'failed-run.png'), fullPage: true });
    expect(attempted).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('shows a successful run: path through Ready to provisioned, marked ok', async () => {
    const { machine, lines } = await journalledRun({ failures: 1 });
    const { page, context, attempted, errors } = await openTrace('ok-run', await renderTraceHtml({ machine, journalLines: lines }));
    expect(await page.getAttribute('#outcome', 'data-outcome')).toBe('ok');
    expect(await page.textContent('#outcome')).toMatch(/^OK: provisioned, in \d+ms, exit 0$/);
    const visited = await visitedStates(page);
    expect(visited).toEqual(expect.arrayContaining(['firstboot.marker', 'firstboot.work.metadata.validating', 'firstboot.ready', 'firstboot.provisioned']));
    expect(visited).not.toContain('firstboot.failed');
    expect(await page.getAttribute('g[data-state="firstboot.provisioned"]', 'data-end')).toBe('ok');
    const fill = await page.$eval('g[data-state="firstboot.provisioned"] path, g[data-state="firstboot.provisioned"] polygon', (shape) => shape.getAttribute('fill'));
    expect(fill).toBe('#7fcf8a');
    await expectLegibleChart(page, 'ok-run overview');
    await page.screenshot({ path: path.join(outDir, 'ok-run.png'), fullPage: true });
    expect(attempted).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });
});
