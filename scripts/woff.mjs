/**
 * WOFF 1.0 ⇄ sfnt (TrueType/OpenType) with node's zlib: scripts/chart-font.mjs reads the Arimo WOFF of
 * @fontsource/arimo and writes the chart font's subsets as WOFF; the tests read them back.
 */
import zlib from 'node:zlib';

/** A table's checksum: the sum of its big-endian 32-bit words, zero-padded. */
export function tableChecksum(data) {
  const padded = Buffer.alloc((data.length + 3) & ~3);
  data.copy(padded);
  let sum = 0;
  for (let at = 0; at < padded.length; at += 4) sum = (sum + padded.readUInt32BE(at)) >>> 0;
  return sum;
}

/** The tables of sfnt bytes: tag (4 letters) → bytes, and the flavor (TrueType or CFF). */
export function readSfnt(sfnt) {
  const tables = new Map();
  const numTables = sfnt.readUInt16BE(4);
  for (let i = 0; i < numTables; i++) {
    const at = 12 + i * 16;
    const offset = sfnt.readUInt32BE(at + 8);
    tables.set(sfnt.toString('latin1', at, at + 4), Buffer.from(sfnt.subarray(offset, offset + sfnt.readUInt32BE(at + 12))));
  }
  return { flavor: sfnt.readUInt32BE(0), tables };
}

/** sfnt bytes of `tables` (tag → bytes), sorted by tag, checksums computed. */
export function writeSfnt(flavor, tables) {
  const entries = [...tables].sort(([a], [b]) => (a < b ? -1 : 1));
  const n = entries.length;
  const log2 = Math.floor(Math.log2(n));
  const head = Buffer.alloc(12 + 16 * n);
  head.writeUInt32BE(flavor, 0);
  head.writeUInt16BE(n, 4);
  head.writeUInt16BE(16 << log2, 6);
  head.writeUInt16BE(log2, 8);
  head.writeUInt16BE(n * 16 - (16 << log2), 10);
  const parts = [head];
  let offset = head.length;
  entries.forEach(([tag, data], i) => {
    head.write(tag, 12 + i * 16, 'latin1');
    head.writeUInt32BE(tableChecksum(data), 16 + i * 16);
    head.writeUInt32BE(offset, 20 + i * 16);
    head.writeUInt32BE(data.length, 24 + i * 16);
    const padded = Buffer.alloc((data.length + 3) & ~3);
    data.copy(padded);
    parts.push(padded);
    offset += padded.length;
  });
  return Buffer.concat(parts);
}

/** sfnt bytes of a WOFF 1.0 file (its tables inflated); any other font file as it is. */
export function sfntOf(bytes) {
  if (bytes.toString('latin1', 0, 4) !== 'wOFF') return bytes;
  const tables = new Map();
  for (let i = 0; i < bytes.readUInt16BE(12); i++) {
    const at = 44 + i * 20;
    const [offset, compLength, origLength] = [4, 8, 12].map((d) => bytes.readUInt32BE(at + d));
    const stored = bytes.subarray(offset, offset + compLength);
    tables.set(bytes.toString('latin1', at, at + 4), compLength < origLength ? zlib.inflateSync(stored) : Buffer.from(stored));
  }
  return writeSfnt(bytes.readUInt32BE(4), tables);
}

/** WOFF 1.0 of sfnt bytes: every table zlib-compressed where that makes it smaller; no metadata, no private block. */
export function woffOf(sfnt) {
  const { flavor, tables } = readSfnt(sfnt);
  const entries = [...tables].sort(([a], [b]) => (a < b ? -1 : 1));
  const header = Buffer.alloc(44 + 20 * entries.length);
  let offset = header.length;
  let sfntSize = 12 + 16 * entries.length;
  const bodies = [];
  entries.forEach(([tag, data], i) => {
    const packed = zlib.deflateSync(data, { level: 9 });
    const stored = packed.length < data.length ? packed : data;
    const at = 44 + i * 20;
    header.write(tag, at, 'latin1');
    header.writeUInt32BE(offset, at + 4);
    header.writeUInt32BE(stored.length, at + 8);
    header.writeUInt32BE(data.length, at + 12);
    header.writeUInt32BE(tableChecksum(data), at + 16);
    const padded = Buffer.alloc((stored.length + 3) & ~3);
    stored.copy(padded);
    bodies.push(padded);
    offset += padded.length;
    sfntSize += (data.length + 3) & ~3;
  });
  header.write('wOFF', 0, 'latin1');
  header.writeUInt32BE(flavor, 4);
  header.writeUInt32BE(offset, 8);
  header.writeUInt16BE(entries.length, 12);
  header.writeUInt32BE(sfntSize, 16);
  header.writeUInt16BE(1, 20);
  return Buffer.concat([header, ...bodies]);
}
