/** Shared helpers for the KVP tests: temp pools and the Python fixtures next to this file. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RECORD_BYTES, decodeRecords } from '../../src/kvp/codec.js';

export const here = path.dirname(fileURLToPath(import.meta.url));

/** A fresh temp directory, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bootstate-kvp-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Runs one of the Python fixtures synchronously and returns its stdout. */
export function python(script: string, args: string[]): string {
  const result = spawnSync('python3', [path.join(here, script), ...args], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${script} failed: ${result.stderr}`);
  return result.stdout;
}

/** Reads a pool file without locks or validation (for asserting what is on disk). */
export function rawRecords(file: string): Array<{ key: string; value: string }> {
  const bytes = fs.readFileSync(file);
  if (bytes.length % RECORD_BYTES !== 0) throw new Error(`pool size ${bytes.length} is not a multiple of ${RECORD_BYTES}`);
  return decodeRecords(bytes);
}
