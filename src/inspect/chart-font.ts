/**
 * The font every chart is drawn in, carried by the picture itself. Graphviz lays labels out with its
 * built-in Helvetica widths (`fontname="Helvetica"` in src/inspect/dot.ts); a viewer without a Helvetica-metric
 * font would draw them wider than their boxes. So each SVG and each page names `bootstate-chart` first and holds
 * it as @font-face rules with data: URIs: a subset of Arimo, whose widths are Helvetica's, and a few DejaVu Sans
 * symbols, each glyph no wider than Graphviz thinks it is (scripts/chart-font.mjs). The names after it are fonts
 * with the same widths, for a viewer that refuses embedded fonts.
 */
import { SYMBOLS_FACE, TEXT_FACE } from './chart-font-data.js';

export const CHART_FONT_FAMILY = 'bootstate-chart';

/** The font-family list chart texts are given: the embedded font, then Helvetica-metric fonts. */
export const CHART_FONT_STACK = `${CHART_FONT_FAMILY},Arimo,'Liberation Sans',Arial,Helvetica,sans-serif`;

/** The @font-face rules of the chart font; a page or an SVG holds them once in its <style>. */
export const CHART_FONT_CSS = [TEXT_FACE, SYMBOLS_FACE]
  .map((face) => `@font-face{font-family:${CHART_FONT_FAMILY};src:url(data:font/woff;base64,${face.woffBase64}) format('woff');unicode-range:${face.unicodeRange}}`)
  .join('\n');

/**
 * Chart texts in the chart font, with plain advances: Graphviz adds widths up, without kerning or ligatures, and
 * at geometric precision: otherwise the viewer's hinting settings (fontconfig's, on Linux) round each advance to
 * whole pixels at the size the chart is drawn at, which for a chart fitted to a window is a few pixels, and a
 * label comes out up to a fifth wider than its box. A style rule wins over Graphviz's
 * `font-family="Helvetica,sans-Serif"` attributes, which stay for a renderer that reads no CSS.
 */
export const CHART_TEXT_CSS = `text{font-family:${CHART_FONT_STACK};font-kerning:none;font-variant-ligatures:none;text-rendering:geometricPrecision}`;

/** A standalone SVG document (docs/*.svg, `bootstate graph --format svg`) that carries the chart font itself. */
export function withEmbeddedFont(svg: string): string {
  const open = svg.search(/<svg\b/);
  if (open < 0) throw new Error('not an SVG document');
  const end = svg.indexOf('>', open) + 1;
  return `${svg.slice(0, end)}\n<style>\n${CHART_FONT_CSS}\n${CHART_TEXT_CSS}\n</style>${svg.slice(end)}`;
}
