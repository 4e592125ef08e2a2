import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeRecords } from '../../src/kvp/codec.js';
import { SUBCOMMANDS } from '../../src/commands/index.js';
import { KVP_OPTIONS, runKvpCommand } from '../../src/commands/kvp.js';
import { rawRecords, tempDir } from './helpers.js';

let dir: string;
let cleanup: () => void;
beforeEach(() => ({ dir, cleanup } = tempDir()));
afterEach(() => cleanup());

async function kvp(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runKvpCommand(argv, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

describe('bootstate kvp', () => {
  it('writes, reads, lists, deletes and clears records in the pool of --dir/--pool', async () => {
    const at = ['--dir', dir, '--pool', '1'];
    expect((await kvp('write', 'a', '1', ...at)).code).toBe(0);
    expect((await kvp('write', 'a', '2', '--append', ...at)).code).toBe(0);
    expect((await kvp('write', 'b', 'x\ny', ...at)).code).toBe(0);
    expect(await kvp('dump', ...at)).toEqual({ code: 0, out: 'a=1\na=2\nb=x\\ny\n', err: '' });
    expect((await kvp('entries', ...at)).out).toBe('a=2\nb=x\\ny\n');
    expect((await kvp('read', 'a', ...at)).out).toBe('a=2\n');
    expect((await kvp('write', 'a', '3', ...at)).code).toBe(0);
    expect((await kvp('dump', ...at)).out).toBe('a=3\nb=x\\ny\n');
    expect((await kvp('delete', 'a', ...at)).out).toBe('deleted=1\n');
    expect((await kvp('clear', ...at)).out).toBe('cleared=true\n');
    expect(fs.statSync(path.join(dir, '.kvp_pool_1')).size).toBe(0);
  });

  it('prints JSON with --json', async () => {
    const file = path.join(dir, 'pool');
    fs.writeFileSync(file, encodeRecords([{ key: 'a', value: '1' }, { key: 'a', value: '2' }, { key: 'b', value: '3' }]));
    expect(JSON.parse((await kvp('dump', '--file', file, '--json')).out)).toEqual([
      { key: 'a', value: '1' }, { key: 'a', value: '2' }, { key: 'b', value: '3' },
    ]);
    expect(JSON.parse((await kvp('entries', '--file', file, '--json')).out)).toEqual({ a: '2', b: '3' });
    expect(JSON.parse((await kvp('read', 'b', '--file', file, '--json')).out)).toEqual({ key: 'b', value: '3' });
    expect(JSON.parse((await kvp('info', '--file', file, '--json')).out)).toMatchObject({ path: file, records: 3, uniqueKeys: 2, corrupt: false });
  });

  it('exits 1 for a missing key and 2 for usage errors', async () => {
    const file = path.join(dir, 'pool');
    expect(await kvp('read', 'nope', '--file', file)).toMatchObject({ code: 1, out: '' });
    expect((await kvp('--file', file)).code).toBe(2);
    expect((await kvp('frobnicate', '--file', file)).err).toMatch(/unknown command 'frobnicate'/);
    expect((await kvp('read', '--file', file)).err).toMatch(/wrong number of arguments for read/);
    expect((await kvp('dump', '--bogus')).code).toBe(2);
    expect((await kvp('dump', '--pool', 'x')).code).toBe(2);
    expect((await kvp('dump', '--append', '--file', file)).code).toBe(2);
  });

  it('accepts exactly the options its help in the CLI table describes', () => {
    expect(Object.keys(KVP_OPTIONS).sort()).toEqual(Object.keys(SUBCOMMANDS.kvp.options).sort());
  });

  it('refuses oversize values unless --unsafe', async () => {
    const file = path.join(dir, 'pool');
    const big = 'v'.repeat(1500);
    const refused = await kvp('write', 'k', big, '--file', file);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/value is 1500 bytes, the limit is 1022/);
    expect((await kvp('write', 'k', big, '--file', file, '--unsafe')).code).toBe(0);
    expect(rawRecords(file)).toEqual([{ key: 'k', value: big }]);
  });

  it('reports a corrupt pool with exit 1, shows it in info, and fixes it with --repair', async () => {
    const file = path.join(dir, 'pool');
    fs.writeFileSync(file, Buffer.concat([encodeRecords([{ key: 'a', value: '1' }]), Buffer.alloc(10, 1)]));
    const refused = await kvp('dump', '--file', file);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/corrupt/);
    expect((await kvp('info', '--file', file)).out).toMatch(/^corrupt=true$/m);
    expect((await kvp('write', 'b', '2', '--file', file, '--repair')).code).toBe(0);
    expect((await kvp('dump', '--file', file)).out).toBe('a=1\nb=2\n');
  });

  it('is-stale exits 0 for a pool from before this boot and 1 for a fresh one; clear --if-stale acts only then', async () => {
    const file = path.join(dir, 'pool');
    fs.writeFileSync(file, encodeRecords([{ key: 'a', value: '1' }]));
    expect(await kvp('is-stale', '--file', file)).toMatchObject({ code: 1, out: 'stale=false\n' });
    expect((await kvp('clear', '--if-stale', '--file', file)).out).toBe('cleared=false\n');
    fs.utimesSync(file, new Date(0), new Date(0));
    expect(await kvp('is-stale', '--file', file)).toMatchObject({ code: 0, out: 'stale=true\n' });
    expect((await kvp('clear', '--if-stale', '--file', file, '--json')).out).toBe('{\n  "cleared": true\n}\n');
    expect(fs.statSync(file).size).toBe(0);
  });

  it('escapes control characters and backslashes in human output so each record stays one line', async () => {
    const file = path.join(dir, 'pool');
    fs.writeFileSync(file, encodeRecords([{ key: 'k\t1', value: 'a\\b\r\u001b[31m' }]));
    expect((await kvp('dump', '--file', file)).out).toBe('k\\t1=a\\\\b\\r\\x1b[31m\n');
  });
});
