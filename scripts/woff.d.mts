export function tableChecksum(data: Buffer): number;
export function readSfnt(sfnt: Buffer): { flavor: number; tables: Map<string, Buffer> };
export function writeSfnt(flavor: number, tables: Map<string, Buffer>): Buffer;
export function sfntOf(bytes: Buffer): Buffer;
export function woffOf(sfnt: Buffer): Buffer;
