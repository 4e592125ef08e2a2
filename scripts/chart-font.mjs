/**
 * Writes src/inspect/chart-font-data.ts: the font every chart bootstate draws is shown in, as small subsets
 * embedded in the pictures themselves, so that a label is drawn with the widths Graphviz laid it out with
 * whatever fonts the viewer has (docs/architecture.md#the-pictures).
 *
 * - Text: Arimo (SIL OFL 1.1, from the pinned @fontsource/arimo), whose advance widths are Arial's, which are the
 *   Helvetica widths Graphviz's built-in table measures `fontname="Helvetica"` with. Printable ASCII and the few
 *   Latin-1/punctuation characters the charts use.
 * - Symbols the charts use that Arimo has no glyph for (→ ∥ ━ ⚡ ✕ ⟳): DejaVu Sans (Bitstream Vera licence,
 *   DejaVu changes public domain; from the pinned dejavu-fonts-ttf).
 *
 * Subsetting (HarfBuzz's hb-subset, the pinned harfbuzzjs) keeps only those characters, drops hinting and the layout
 * tables (kerning, ligatures: Graphviz adds plain advances, so the browser must too), and keeps the copyright and
 * licence records of the name table. Graphviz's table has exact widths for ASCII only and one width for any other
 * character; the few glyphs wider than that (… × — → ✕ ⟳) get that width as their advance. The result is stored as WOFF
 * 1.0 (zlib), which node can write without another dependency. Run with `npm run chart-font` after changing the
 * character lists; the build and the pages use the committed file, never the machine's fonts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { instance } from '@viz-js/viz';
import * as hb from 'harfbuzzjs';
import { readSfnt, sfntOf, woffOf, writeSfnt } from './woff.mjs';

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const modules = path.join(repo, 'node_modules');

/** Printable ASCII, and the non-ASCII characters of the text face. */
const TEXT_CHARS = [...Array.from({ length: 0x7f - 0x20 }, (_, i) => 0x20 + i), ...[...'…×·–—‘’“”'].map((c) => c.codePointAt(0))];
/** The symbols the charts draw that Arimo lacks. */
const SYMBOL_CHARS = [...'→∥━⚡✕⟳'].map((c) => c.codePointAt(0));

const FACES = [
  { name: 'text', file: path.join(modules, '@fontsource/arimo/files/arimo-latin-400-normal.woff'), chars: TEXT_CHARS },
  { name: 'symbols', file: path.join(modules, 'dejavu-fonts-ttf/ttf/DejaVuSans.ttf'), chars: SYMBOL_CHARS },
];

const tag = (text) => text.split('').reduce((value, char) => (value << 8) | char.charCodeAt(0), 0) >>> 0;

/** The subset of `sfnt` holding `chars`, without hinting, layout tables or name records other than 0–6, 13, 14. */
async function subset(sfnt, chars) {
  const wasm = fs.readFileSync(path.join(modules, 'harfbuzzjs/dist/harfbuzz-subset.wasm'));
  const { exports: hbs } = (await WebAssembly.instantiate(wasm)).instance;
  const heap = () => new Uint8Array(hbs.memory.buffer);
  const input = hbs.malloc(sfnt.length);
  heap().set(sfnt, input);
  const blob = hbs.hb_blob_create(input, sfnt.length, 2 /* HB_MEMORY_MODE_WRITABLE */, 0, 0);
  const face = hbs.hb_face_create(blob, 0);
  hbs.hb_blob_destroy(blob);
  const request = hbs.hb_subset_input_create_or_fail();
  const unicodes = hbs.hb_subset_input_unicode_set(request);
  for (const char of chars) hbs.hb_set_add(unicodes, char);
  const drop = hbs.hb_subset_input_set(request, 3 /* HB_SUBSET_SETS_DROP_TABLE_TAG */);
  for (const name of ['GPOS', 'GSUB', 'GDEF', 'kern', 'hdmx', 'VDMX', 'LTSH', 'DSIG', 'gasp', 'FFTM', 'MATH', 'STAT']) hbs.hb_set_add(drop, tag(name));
  const names = hbs.hb_subset_input_set(request, 4 /* HB_SUBSET_SETS_NAME_ID */);
  hbs.hb_set_clear(names);
  for (const id of [0, 1, 2, 3, 4, 5, 6, 13, 14]) hbs.hb_set_add(names, id);
  hbs.hb_subset_input_set_flags(request, 1 /* HB_SUBSET_FLAGS_NO_HINTING */);
  const result = hbs.hb_subset_or_fail(face, request);
  if (!result) throw new Error('hb_subset_or_fail failed');
  const out = hbs.hb_face_reference_blob(result);
  const data = hbs.hb_blob_get_data(out, 0);
  const bytes = Buffer.from(heap().slice(data, data + hbs.hb_blob_get_length(out)));
  hbs.hb_blob_destroy(out);
  hbs.hb_face_destroy(result);
  hbs.hb_subset_input_destroy(request);
  hbs.hb_face_destroy(face);
  hbs.free(input);
  return bytes;
}

/** The CSS unicode-range of `chars`, runs of consecutive code points as one range. */
function ranges(chars) {
  const sorted = [...new Set(chars)].sort((a, b) => a - b);
  const hex = (char) => char.toString(16).toUpperCase().padStart(4, '0');
  const runs = [];
  for (const char of sorted) {
    const last = runs.at(-1);
    if (last && char === last[1] + 1) last[1] = char;
    else runs.push([char, char]);
  }
  return runs.map(([from, to]) => (from === to ? `U+${hex(from)}` : `U+${hex(from)}-${hex(to)}`)).join(',');
}

/** The width Graphviz gives `char` in its Helvetica table, in em: the width it records for 100 of them at 100 pt. */
const viz = await instance();
function graphvizEm(char) {
  const label = String.fromCodePoint(char).repeat(100).replace(/[\\"]/g, (c) => `\\${c}`);
  const dot = `digraph { node [shape=plain, fontname="Helvetica", fontsize=100]; a [label="${label}"] }`;
  const text = JSON.parse(viz.renderString(dot, { format: 'json' })).objects[0]._ldraw_.find((op) => op.op === 'T');
  return text.width / 100 / 100;
}

/**
 * Where a glyph is wider than Graphviz thinks (its table has exact widths for ASCII only and one width for any
 * other character), its advance is cut to Graphviz's width, so that no label is ever wider than the box Graphviz
 * made for it. Returns the characters changed and by how much.
 */
function fitAdvances(sfnt, chars) {
  const { flavor, tables } = readSfnt(sfnt);
  const face = new hb.Face(new hb.Blob(sfnt));
  const font = new hb.Font(face);
  const upem = face.upem;
  // Every glyph gets an advance of its own (hmtx may share the last advance among the trailing glyphs).
  const hhea = tables.get('hhea');
  const glyphs = tables.get('maxp').readUInt16BE(4);
  const shared = tables.get('hmtx');
  const metrics = hhea.readUInt16BE(34);
  const hmtx = Buffer.alloc(glyphs * 4);
  for (let glyph = 0; glyph < glyphs; glyph++) {
    const long = glyph < metrics;
    hmtx.writeUInt16BE(shared.readUInt16BE(long ? glyph * 4 : (metrics - 1) * 4), glyph * 4);
    hmtx.writeInt16BE(long ? shared.readInt16BE(glyph * 4 + 2) : shared.readInt16BE(metrics * 4 + (glyph - metrics) * 2), glyph * 4 + 2);
  }
  hhea.writeUInt16BE(glyphs, 34);
  tables.set('hmtx', hmtx);
  const changed = [];
  for (const char of chars) {
    const glyph = font.nominalGlyph(char);
    if (glyph === undefined) throw new Error(`no glyph for U+${char.toString(16)}`);
    const advance = font.glyphHAdvance(glyph);
    // Graphviz's table is in thousandths of an em, the font's in 2048ths: half a unit of difference is rounding.
    const exact = graphvizEm(char) * upem;
    if (advance <= exact + 0.5) continue;
    const limit = Math.floor(exact);
    hmtx.writeUInt16BE(limit, glyph * 4);
    changed.push(`${String.fromCodePoint(char)} ${(advance / upem).toFixed(3)}→${(limit / upem).toFixed(3)} em`);
  }
  return { sfnt: writeSfnt(flavor, tables), changed };
}

let source = `// Generated by scripts/chart-font.mjs (npm run chart-font): do not edit.
// Subsets of Arimo (SIL Open Font License 1.1, Copyright 2020 The Arimo Project Authors) and DejaVu Sans
// (Bitstream Vera Fonts licence; DejaVu changes public domain); each font's copyright and licence are kept in its
// name table; the licences in full are in chart-font-LICENSES.txt beside this file.

/** One face of the chart font: WOFF 1.0 bytes in base64 and the characters it holds (a CSS unicode-range). */
export interface ChartFontFace { woffBase64: string; unicodeRange: string }

`;
for (const face of FACES) {
  const fitted = fitAdvances(await subset(sfntOf(fs.readFileSync(face.file)), face.chars), face.chars);
  const woff = woffOf(fitted.sfnt);
  console.error(`${face.name}: ${face.chars.length} characters, ${woff.length} bytes of WOFF, ${Math.ceil(woff.length / 3) * 4} of base64; narrowed to Graphviz's widths: ${fitted.changed.join(', ') || 'none'}`);
  source += `export const ${face.name.toUpperCase()}_FACE: ChartFontFace = {\n  unicodeRange: '${ranges(face.chars)}',\n  woffBase64:\n    '${woff.toString('base64')}',\n};\n`;
}
fs.writeFileSync(path.join(repo, 'src/inspect/chart-font-data.ts'), source);
console.error('wrote src/inspect/chart-font-data.ts');
// The licences in full, beside the data (each subset's name table holds its copyright and licence notice).
const licences = [
  ['Arimo (the text face), from @fontsource/arimo', path.join(modules, '@fontsource/arimo/LICENSE')],
  ['DejaVu Sans (the symbols face), from dejavu-fonts-ttf', path.join(modules, 'dejavu-fonts-ttf/LICENSE')],
].map(([what, file]) => `${'='.repeat(78)}\nThe chart font's subset of ${what}:\n${'='.repeat(78)}\n\n${fs.readFileSync(file, 'utf8').trim()}\n`);
fs.writeFileSync(path.join(repo, 'src/inspect/chart-font-LICENSES.txt'), licences.join('\n'));
console.error('wrote src/inspect/chart-font-LICENSES.txt');
