/**
 * A small read-only ISO 9660 reader for one file, for provisioning media that cannot be mounted (kernels built
 * without iso9660). It reads the volume descriptors from sector 16, then walks directory records from the root:
 * Rock Ridge `NM` names (exact), plain ISO names (`OVF-ENV.XML;1` matches `ovf-env.xml`: version and trailing
 * dot dropped, case ignored, as Linux maps them), then the Joliet tree (UCS-2 BE names, exact). Everything is
 * read by offset with `fs.read` and bounded: descriptors, directory sizes, path depth, SUSP continuation areas
 * and the file itself. UDF is not read.
 *
 * @example
 *   const xml = await readFileFromIso('/dev/sr0', 'ovf-env.xml', 1024 * 1024);   // Buffer, or null when absent
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

export type IsoErrorCode = 'NOT_ISO9660' | 'CORRUPT' | 'UNSUPPORTED' | 'TOO_LARGE' | 'TRUNCATED';

/** Everything this module throws on bad input; I/O errors from opening the device pass through unchanged. */
export class IsoError extends Error {
  constructor(
    readonly code: IsoErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'IsoError';
  }
}

const SECTOR = 2048;
const FIRST_DESCRIPTOR = 16;
const MAX_DESCRIPTORS = 64;
const MAX_DIRECTORY_BYTES = 4 * 1024 * 1024;
const MAX_DEPTH = 8;
const MAX_CONTINUATIONS = 1024;
const FLAG_DIRECTORY = 0x02;
const FLAG_ASSOCIATED = 0x04;
const FLAG_MULTI_EXTENT = 0x80;

interface DirRecord {
  extent: number;
  size: number;
  flags: number;
  /** Identifier bytes as stored (d-characters or UCS-2 BE). */
  rawName: Buffer;
  /** The Rock Ridge name when the record carries NM entries. */
  rockRidgeName: string | null;
  interleaved: boolean;
  /** The record's system use area (SUSP entries such as Rock Ridge NM and CE). */
  systemUse: Buffer;
}

interface Tree {
  kind: 'primary' | 'joliet';
  blockSize: number;
  root: DirRecord;
  /** Rock Ridge continuation areas still allowed to be read, across the whole lookup. */
  continuations: number;
}

/**
 * Reads file `name` (a path relative to the root, e.g. `ovf-env.xml` or `a/b.txt`) from the ISO 9660 image or
 * block device `deviceOrImage`. Resolves to its bytes, or null when the volume has no such file.
 *
 * @throws IsoError NOT_ISO9660 when there is no primary volume descriptor, CORRUPT/TRUNCATED/UNSUPPORTED on a
 *   damaged or exotic volume, TOO_LARGE when the file is longer than `maxBytes`.
 */
export async function readFileFromIso(deviceOrImage: string, name: string, maxBytes: number): Promise<Buffer | null> {
  const parts = name.split('/').filter(Boolean);
  if (parts.length === 0 || parts.length > MAX_DEPTH) throw new RangeError(`bad path ${JSON.stringify(name)}`);
  const handle = await open(deviceOrImage, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile() && !stat.isBlockDevice()) throw new IsoError('UNSUPPORTED', `${deviceOrImage} is neither a file nor a block device`);
    const trees = await readDescriptors(handle);
    for (const tree of trees) {
      const found = await lookup(handle, tree, parts);
      if (found) return await readExtent(handle, tree, found, maxBytes);
    }
    return null;
  } finally {
    await handle.close();
  }
}

/** The primary tree, then the Joliet tree when a Joliet supplementary descriptor is present. */
async function readDescriptors(handle: FileHandle): Promise<Tree[]> {
  let primary: Tree | null = null;
  let joliet: Tree | null = null;
  for (let i = 0; i < MAX_DESCRIPTORS; i++) {
    const sector = await readExact(handle, (FIRST_DESCRIPTOR + i) * SECTOR, SECTOR, i === 0 ? 'NOT_ISO9660' : 'TRUNCATED');
    if (sector.toString('latin1', 1, 6) !== 'CD001') {
      if (i === 0) throw new IsoError('NOT_ISO9660', 'no ISO 9660 volume descriptor at sector 16');
      throw new IsoError('CORRUPT', `volume descriptor ${FIRST_DESCRIPTOR + i} lacks the CD001 identifier`);
    }
    const type = sector[0];
    if (type === 255) break;
    if (type === 1 && !primary) primary = treeFrom(sector, 'primary');
    if (type === 2 && !joliet && isJoliet(sector)) joliet = treeFrom(sector, 'joliet');
  }
  if (!primary) throw new IsoError('NOT_ISO9660', 'no primary volume descriptor');
  return joliet ? [primary, joliet] : [primary];
}

function isJoliet(sector: Buffer): boolean {
  const escape = sector.subarray(88, 120);
  for (let i = 0; i + 2 < escape.length; i++) {
    if (escape[i] === 0x25 && escape[i + 1] === 0x2f && (escape[i + 2] === 0x40 || escape[i + 2] === 0x43 || escape[i + 2] === 0x45)) return true;
  }
  return false;
}

function treeFrom(sector: Buffer, kind: Tree['kind']): Tree {
  const blockSize = sector.readUInt16LE(128);
  if (blockSize !== 512 && blockSize !== 1024 && blockSize !== 2048) {
    throw new IsoError('UNSUPPORTED', `logical block size ${blockSize} is not supported`);
  }
  const root = parseRecord(sector.subarray(156, 190), 0, 0);
  if (!root || !(root.flags & FLAG_DIRECTORY)) throw new IsoError('CORRUPT', 'the root directory record is invalid');
  return { kind, blockSize, root, continuations: MAX_CONTINUATIONS };
}

/** Walks `parts` from the root; the last part must be a file, the others directories. */
async function lookup(handle: FileHandle, tree: Tree, parts: string[]): Promise<DirRecord | null> {
  let dir = tree.root;
  let skip = 0;
  for (const [depth, part] of parts.entries()) {
    const data = await readDirectory(handle, tree, dir);
    const records = directoryRecords(data, tree.blockSize, skip);
    if (depth === 0 && tree.kind === 'primary') {
      skip = suspSkip(records[0]);
      if (skip > 0) records.splice(0, records.length, ...directoryRecords(data, tree.blockSize, skip));
    }
    const last = depth === parts.length - 1;
    let match: DirRecord | null = null;
    for (const record of records) {
      if (isDotEntry(record) || record.flags & FLAG_ASSOCIATED) continue;
      if (Boolean(record.flags & FLAG_DIRECTORY) === last) continue;
      if (tree.kind === 'primary' && record.rockRidgeName === null) record.rockRidgeName = await rockRidgeName(handle, tree, record);
      if (nameMatches(tree, record, part)) {
        match = record;
        break;
      }
    }
    if (!match) return null;
    dir = match;
  }
  return dir;
}

function nameMatches(tree: Tree, record: DirRecord, wanted: string): boolean {
  if (tree.kind === 'joliet') return stripVersion(decodeUcs2(record.rawName)) === wanted;
  if (record.rockRidgeName !== null) return record.rockRidgeName === wanted;
  return stripVersion(record.rawName.toString('latin1')).replace(/\.$/, '').toLowerCase() === wanted.toLowerCase();
}

function stripVersion(name: string): string {
  return name.replace(/;\d*$/, '');
}

function decodeUcs2(bytes: Buffer): string {
  let out = '';
  for (let i = 0; i + 1 < bytes.length; i += 2) out += String.fromCharCode(bytes.readUInt16BE(i));
  return out;
}

function isDotEntry(record: DirRecord): boolean {
  return record.rawName.length === 1 && (record.rawName[0] === 0 || record.rawName[0] === 1);
}

async function readDirectory(handle: FileHandle, tree: Tree, dir: DirRecord): Promise<Buffer> {
  if (dir.size > MAX_DIRECTORY_BYTES) throw new IsoError('UNSUPPORTED', `directory of ${dir.size} bytes is larger than ${MAX_DIRECTORY_BYTES}`);
  return readExact(handle, dir.extent * tree.blockSize, dir.size, 'TRUNCATED');
}

/** Splits a directory extent into records; records never cross a logical sector, a zero length pads to the next one. */
function directoryRecords(data: Buffer, sectorSize: number, suspSkipBytes: number): DirRecord[] {
  const out: DirRecord[] = [];
  let offset = 0;
  while (offset < data.length) {
    const length = data[offset]!;
    if (length === 0) {
      offset = (Math.floor(offset / sectorSize) + 1) * sectorSize;
      continue;
    }
    const sectorEnd = (Math.floor(offset / sectorSize) + 1) * sectorSize;
    if (offset + length > Math.min(sectorEnd, data.length)) throw new IsoError('CORRUPT', `directory record at ${offset} crosses its sector`);
    const record = parseRecord(data.subarray(offset, offset + length), 0, suspSkipBytes);
    if (!record) throw new IsoError('CORRUPT', `directory record at ${offset} is malformed`);
    out.push(record);
    offset += length;
  }
  return out;
}

function parseRecord(bytes: Buffer, offset: number, suspSkipBytes: number): DirRecord | null {
  const length = bytes[offset];
  if (length === undefined || length < 34 || offset + length > bytes.length) return null;
  const nameLength = bytes[offset + 32]!;
  if (nameLength === 0 || 33 + nameLength > length) return null;
  const rawName = Buffer.from(bytes.subarray(offset + 33, offset + 33 + nameLength));
  const suStart = Math.min(length, 33 + nameLength + (nameLength % 2 === 0 ? 1 : 0) + suspSkipBytes);
  return {
    extent: bytes.readUInt32LE(offset + 2),
    size: bytes.readUInt32LE(offset + 10),
    flags: bytes[offset + 25]!,
    rawName,
    rockRidgeName: null,
    interleaved: bytes[offset + 26] !== 0 || bytes[offset + 27] !== 0,
    systemUse: Buffer.from(bytes.subarray(offset + suStart, offset + length)),
  };
}

/** LEN_SKP of the SUSP `SP` entry in the root's `.` record (0 without SUSP). */
function suspSkip(dot: DirRecord | undefined): number {
  const su = dot?.systemUse;
  if (!su || su.length < 7) return 0;
  if (su.toString('latin1', 0, 2) === 'SP' && su[4] === 0xbe && su[5] === 0xef) return su[6]!;
  return 0;
}

/** The Rock Ridge name from the record's NM entries (following CE continuation areas), or null when it has none. */
async function rockRidgeName(handle: FileHandle, tree: Tree, record: DirRecord): Promise<string | null> {
  let area: Buffer | null = record.systemUse;
  const pieces: Buffer[] = [];
  let sawName = false;
  while (area) {
    let next: { block: number; offset: number; length: number } | null = null;
    let offset = 0;
    while (offset + 4 <= area.length) {
      const signature = area.toString('latin1', offset, offset + 2);
      const length = area[offset + 2]!;
      if (length < 4 || offset + length > area.length) break;
      const entry = area.subarray(offset, offset + length);
      if (signature === 'ST') break;
      if (signature === 'NM' && length >= 5) {
        const flags = entry[4]!;
        sawName = true;
        if (flags & 0x02) pieces.push(Buffer.from('.'));
        else if (flags & 0x04) pieces.push(Buffer.from('..'));
        else pieces.push(Buffer.from(entry.subarray(5)));
      }
      if (signature === 'CE' && length >= 28) {
        next = { block: entry.readUInt32LE(4), offset: entry.readUInt32LE(12), length: entry.readUInt32LE(20) };
      }
      offset += length;
    }
    if (!next) break;
    if (tree.continuations-- <= 0) throw new IsoError('UNSUPPORTED', `more than ${MAX_CONTINUATIONS} Rock Ridge continuation areas`);
    if (next.offset + next.length > tree.blockSize) throw new IsoError('CORRUPT', 'Rock Ridge continuation area crosses its block');
    area = await readExact(handle, next.block * tree.blockSize + next.offset, next.length, 'TRUNCATED');
  }
  return sawName ? Buffer.concat(pieces).toString('utf8') : null;
}

async function readExtent(handle: FileHandle, tree: Tree, record: DirRecord, maxBytes: number): Promise<Buffer> {
  if (record.flags & FLAG_MULTI_EXTENT) throw new IsoError('UNSUPPORTED', 'multi-extent files are not supported');
  if (record.interleaved) throw new IsoError('UNSUPPORTED', 'interleaved files are not supported');
  if (record.size > maxBytes) throw new IsoError('TOO_LARGE', `file is ${record.size} bytes, more than ${maxBytes}`);
  return readExact(handle, record.extent * tree.blockSize, record.size, 'TRUNCATED');
}

/** Reads exactly `length` bytes at `position`, or throws `code` when the image ends first. */
async function readExact(handle: FileHandle, position: number, length: number, code: IsoErrorCode): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) throw new IsoError(code, code === 'NOT_ISO9660' ? 'too short to hold an ISO 9660 volume' : `image ends before byte ${position + length}`);
    filled += bytesRead;
  }
  return buffer;
}
