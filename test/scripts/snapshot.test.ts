/**
 * The startup snapshot (scripts/build/snapshot.mjs, opt-in): its builder's entry is the same bytes from the same
 * inputs and its blob differs between two builds only by Node's own build-time state; a run started from it gives
 * what the plain program gives (`--version`, `--help`, a provisioning run and a monitor cycle against the fake
 * fabric on loopback); and its launcher runs the plain program, with a warning, whenever the snapshot cannot load
 * (missing, older than node, another Node's, truncated, corrupt), so a first boot never fails for it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT, markers, reportKinds, runAgent } from '../integration/agent.js';

const BUILDER = resolve('scripts/build/snapshot.mjs');
const work = mkdtempSync(join(tmpdir(), 'bootstate-snapshot-test-'));
/** A copy of dist/ with the snapshot built into it. */
const dist = join(work, 'dist');
const launcher = join(dist, 'bootstate-snapshot');
const blob = join(dist, 'bootstate.snapshot');
const plain = join(dist, 'bootstate.cjs');
let fabric: FakeFabric;

beforeAll(async () => {
  // A missing build fails the file loudly rather than skipping it.
  // The plain program's files only: not the executables, packages or other architectures' builds beside them.
  mkdirSync(dist);
  for (const name of readdirSync(dirname(AGENT)).filter((file) => /^(bootstate\.mjs|.*\.(cjs|js|cache|wasm|node))$/.test(file))) {
    cpSync(join(dirname(AGENT), name), join(dist, name), { dereference: false });
  }
  execFileSync(process.execPath, [BUILDER, dist], { stdio: 'pipe' });
  fabric = await startFakeFabric();
}, 180_000);
afterAll(async () => {
  await fabric?.close();
  rmSync(work, { recursive: true, force: true });
});

async function run(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(argv[0]!, argv.slice(1), { env: { ...process.env, ...env }, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** What a run's log lines said, without their times and PIDs, in order of step (steps run side by side). */
const warnings = (stderr: string): string[] =>
  stderr
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const { level, step, msg } = JSON.parse(line) as { level: number; step?: string; msg: string };
      return `${level} ${step ?? '-'}: ${msg}`;
    })
    .sort();

/**
 * Replaces the blob with `bytes` for one test, then puts the built one back; with `asBuilt` its cksum file is made to
 * match them, so it is node that judges them (as it would a blob built by another Node).
 */
async function withBlob<T>(bytes: Buffer | null, test: () => Promise<T>, options: { asBuilt?: boolean } = {}): Promise<T> {
  const built = readFileSync(blob);
  const sum = readFileSync(`${blob}.cksum`);
  if (bytes === null) unlinkSync(blob);
  else writeFileSync(blob, bytes);
  if (bytes !== null && options.asBuilt) writeFileSync(`${blob}.cksum`, execFileSync('cksum', [], { input: bytes }));
  try {
    return await test();
  } finally {
    writeFileSync(blob, built);
    writeFileSync(`${blob}.cksum`, sum);
  }
}

describe('building the snapshot', () => {
  it('writes the same entry from the same inputs, and a blob that differs only by Node’s own build-time state', () => {
    const entry = readFileSync(join(dist, 'bootstate-snapshot.cjs'));
    const first = readFileSync(blob);
    execFileSync(process.execPath, [BUILDER, dist], { stdio: 'pipe' });
    expect(readFileSync(join(dist, 'bootstate-snapshot.cjs')).equals(entry)).toBe(true);
    const second = readFileSync(blob);
    expect(second.length).toBe(first.length);
    let differing = 0;
    for (let i = 0; i < first.length; i++) if (first[i] !== second[i]) differing++;
    // Measured: a few dozen bytes (even an empty builder's blob differs by ~20); a heap laid out differently, thousands.
    expect(differing).toBeLessThan(256);
  }, 120_000);
});

describe('a run started from the snapshot', () => {
  it('answers --version and --help as the plain program does', async () => {
    for (const args of [['--version'], ['--help']]) {
      const fromSnapshot = await run([launcher, ...args]);
      const without = await run([process.execPath, plain, ...args]);
      expect(fromSnapshot).toEqual(without);
      expect(fromSnapshot.stderr).toBe('');
    }
  });

  it('provisions against the fake fabric as the plain program does', async () => {
    const fromSnapshot = await runAgent(fabric, { command: [launcher] });
    const reportsFromSnapshot = reportKinds(fabric);
    fabric.reports.length = 0;
    const without = await runAgent(fabric, { command: [process.execPath, plain] });
    expect(warnings(fromSnapshot.stderr)).toEqual(warnings(without.stderr));
    expect(fromSnapshot.code).toBe(0);
    expect(without.code).toBe(0);
    expect(markers(fromSnapshot.root)).toEqual(markers(without.root));
    expect(markers(fromSnapshot.root).length).toBeGreaterThan(0);
    expect(reportsFromSnapshot).toEqual(reportKinds(fabric));
    expect(reportsFromSnapshot).toContain('Ready');
  }, 60_000);

  it('runs a monitor cycle as the plain program does', async () => {
    const q = JSON.stringify;
    /** A config of its own for each run: a cycle posts the plugin's versions only when they changed since the last. */
    const configFor = (name: string) => {
      const file = join(work, `${name}.toml`);
      writeFileSync(
        file,
        `[wireserver]\naddress = "127.0.0.1"\n[monitor]\nhealth_service_port = ${fabric.ports.wireserver}\nhost_plugin_port = ${fabric.ports.hostPlugin}\n` +
          `state_file = ${q(join(work, name, 'monitor-state.json'))}\n[imds]\nendpoint = ${q(fabric.imdsUrl)}\n[data_dir]\npath = ${q(join(work, name, 'data'))}\n` +
          `[log_path]\npath = ${q(join(work, name, 'monitor.log'))}\n[telemetry]\nkvp_dir = ${q(join(work, name, 'kvp'))}\n[hostname_publishing]\nmonitor = false\n`,
      );
      return file;
    };
    const fromSnapshot = await run([launcher, 'monitor', '--once', '--config', configFor('snapshot')]);
    const without = await run([process.execPath, plain, 'monitor', '--once', '--config', configFor('plain')]);
    expect(fromSnapshot).toEqual(without);
    expect(fromSnapshot.code).toBe(0);
  }, 60_000);
});

describe('when the snapshot cannot load, the launcher runs the plain program with a warning', () => {
  const version = async () => run([launcher, '--version']);
  const expected = async () => (await run([process.execPath, plain, '--version'])).stdout;

  it('runs it when the blob is missing', async () => {
    const result = await withBlob(null, version);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(await expected());
    expect(result.stderr).toMatch(/warning: no usable startup snapshot/);
  });

  it('runs it when node is newer than the blob (upgraded since the build)', async () => {
    const result = await withBlob(readFileSync(blob), async () => {
      utimesSync(blob, new Date(0), new Date(0));
      return version();
    });
    expect(result.stdout).toBe(await expected());
    expect(result.stderr).toMatch(/warning: no usable startup snapshot/);
  });

  it('runs it when node refuses a blob another Node version built', async () => {
    const other = Buffer.from(readFileSync(blob));
    const own = Buffer.from(process.version.slice(1));
    const at = other.indexOf(own);
    expect(at).toBeGreaterThan(0);
    Buffer.from(process.version.slice(1).replace(/[0-9]/g, '9')).copy(other, at);
    const result = await withBlob(other, version, { asBuilt: true });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(await expected());
    expect(result.stderr).toMatch(/did not load \(exit 14\); running without it/);
  });

  it('runs it when the blob is truncated or its heap corrupt', async () => {
    const built = readFileSync(blob);
    const corrupt = Buffer.from(built);
    corrupt[Math.floor(corrupt.length / 2)]! ^= 0xff;
    for (const bytes of [built.subarray(0, 4096), corrupt]) {
      const result = await withBlob(bytes, version);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(await expected());
      expect(result.stderr).toMatch(/is not as built \(its cksum differs from .*\); running without it/);
      // Past the launcher's check (a blob as built that node still refuses), node's own checks end it.
      const judged = await withBlob(bytes, version, { asBuilt: true });
      expect(judged.code).toBe(0);
      expect(judged.stdout).toBe(await expected());
      expect(judged.stderr).toMatch(/did not load \(exit 1[34][0-9]\); running without it/);
    }
  });

  it('runs it when a byte past V8\'s checked heap is corrupt (Node\'s own data, its code caches), which node may run from or abort on', async () => {
    // V8 checks its heap's checksum; Node's part of the blob is not checked: a flipped byte there was seen to run
    // silently (a realm value missing), or to abort node (std::bad_alloc, exit 134) before the program's first line.
    const built = readFileSync(blob);
    const help = (await run([process.execPath, plain, '--help'])).stdout;
    for (let i = 0; i < 8; i++) {
      const corrupt = Buffer.from(built);
      corrupt[Math.floor(corrupt.length * (0.72 + i * 0.035))]! ^= 0xff;
      const result = await withBlob(corrupt, async () => run([launcher, '--help']));
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toBe(help);
      expect(result.stderr, `byte ${i}`).toMatch(/warning: .*snapshot.*running without it/);
    }
  }, 60_000);

  it('finds the blob and the plain program beside the launcher it links to, when started through a link elsewhere (as /usr/bin/bootstate)', async () => {
    const bin = mkdtempSync(join(work, 'bin-'));
    symlinkSync(launcher, join(bin, 'bootstate'));
    const result = await run([join(bin, 'bootstate'), '--version']);
    expect(result).toEqual({ code: 0, stdout: await expected(), stderr: '' });
    const fallback = await withBlob(null, async () => run([join(bin, 'bootstate'), '--version']));
    expect(fallback.code, fallback.stderr).toBe(0);
    expect(fallback.stdout).toBe(await expected());
  });

  it('runs it without a word when BOOTSTATE_SNAPSHOT=off', async () => {
    const result = await run([launcher, '--version'], { BOOTSTATE_SNAPSHOT: 'off' });
    expect(result).toEqual({ code: 0, stdout: await expected(), stderr: '' });
  });
});
