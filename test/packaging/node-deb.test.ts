/**
 * bootstate-node (`scripts/build/deb.mjs --node`): architecture-independent, the plain program in /usr/lib/bootstate
 * run by the distribution's nodejs, with the .deb's units, configuration and maintainer scripts; no machine code.
 * Its boot on Debian 13 is test/boot/node-package.test.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesFor } from '../../packaging/installed-files.mjs';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
let out: string;
let deb: string;
let extracted: string;

beforeAll(() => {
  out = mkdtempSync(join(tmpdir(), 'bootstate-node-deb-'));
  execFileSync(process.execPath, [join(root, 'scripts/build/deb.mjs'), '--node'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, BOOTSTATE_DIST: out } });
  deb = join(out, `bootstate-node_${version}_all.deb`);
  extracted = join(out, 'extracted');
  execFileSync('dpkg-deb', ['-x', deb, extracted]);
}, 600_000);

afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

const field = (name: string) => execFileSync('dpkg-deb', ['-f', deb, name], { encoding: 'utf8' }).trim();

describe('bootstate-node', () => {
  it("is architecture-independent, depends on nodejs (>= 20.18), and takes the single executable's place", () => {
    expect([field('Package'), field('Architecture')]).toEqual(['bootstate-node', 'all']);
    expect(field('Depends')).toBe('nodejs (>= 20.18), passwd, mount, nftables | iptables');
    expect([field('Conflicts'), field('Replaces')]).toEqual(['bootstate', 'bootstate']);
  });

  it('holds the units, configuration and preset of the .deb, the program under /usr/lib/bootstate, and no ELF file', () => {
    const listing = execFileSync('dpkg-deb', ['-c', deb], { encoding: 'utf8' });
    const files = listing.split('\n').filter((l) => l.startsWith('-')).map((l) => l.split(/\s+/).at(-1)!.replace(/^\.\//, ''));
    const shared = filesFor('deb').filter((f) => f.made !== 'executable' && !f.path.includes('/doc/') && !f.path.includes('/lintian/')).map((f) => f.path);
    expect(files).toEqual(expect.arrayContaining([...shared, 'usr/lib/bootstate/bootstate.cjs', 'usr/lib/bootstate/bootstate-provision.bundle.js']));
    expect(files.filter((f) => f.endsWith('.node') || f.endsWith('.cache'))).toEqual([]);
    for (const file of files) expect(readFileSync(join(extracted, file)).subarray(0, 4).toString('latin1'), file).not.toBe('\x7fELF');
    expect(readlinkSync(join(extracted, 'usr/bin/bootstate'))).toBe('../lib/bootstate/bootstate.cjs');
    expect(Number(field('Installed-Size'))).toBeLessThan(4096);
  });

  it('runs from where it is installed with this Node: --version', () => {
    expect(execFileSync(process.execPath, [join(extracted, 'usr/bin/bootstate'), '--version'], { encoding: 'utf8' })).toBe(`bootstate ${version}\n`);
  });

  it('passes lintian without errors', () => {
    const result = spawnSync('lintian', ['--tag-display-limit', '0', deb], { encoding: 'utf8' });
    expect(`${result.stdout}${result.stderr}`.split('\n').filter((line) => line.startsWith('E: '))).toEqual([]);
  }, 300_000);
});
