/**
 * The arm64 boot timed, under qemu emulation (the root and VMs of test/boot/arm64.test.ts): spawn of
 * systemd-nspawn → the first key login, the Ready report's arrival, and bootstate.service's start → active (READY=1),
 * for three disks booted in turn: the arm64 .deb with its code caches, the same without them (binary.mjs
 * --no-code-cache), and the root with the key baked in and no agent (the floor). Every figure is qemu's: an arm64
 * CPU runs the same boot several times faster, and the ratios, not the seconds, are what carries over.
 *
 *   node --import tsx bench/arm64-boot.ts        (as root; BENCH_RUNS=N boots of each, default 3)
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildDeb, debianRoot, installDeb, SUITE } from '../test/boot/debian-root.js';
import { emulationLayer, holdBinfmt } from '../test/boot/emulation.js';
import { agentEnded, createMachine, show, until } from '../test/boot/machine.js';
import { bakeKey, imdsDocument, type Rig } from '../test/boot/scenario.js';
import { type Row, REPO, interleave, median, report } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const USER = 'azureuser';

interface Timing {
  login: number;
  ready: number | null;
  active: number | null;
}

const hold = await holdBinfmt('arm64');
const workDir = await mkdtemp(path.join(tmpdir(), 'bootstate-arm64-bench-'));
try {
  const root = await debianRoot([], SUITE, 'arm64');
  const emulated = await emulationLayer(path.join(workDir, 'emulation'));
  const key = path.join(workDir, 'key');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]);
  const publicKey = (await readFile(`${key}.pub`, 'utf8')).trim();
  /** The .deb built into `dir` with or without caches, installed in a layer of its own; the layer's upper dir. */
  const debLayer = async (name: string, caches: boolean) => {
    const dist = path.join(workDir, name);
    const env = { ...process.env, BOOTSTATE_DIST: dist };
    execFileSync(process.execPath, [path.join(REPO, 'scripts/build/binary.mjs'), '--arch', 'arm64', ...(caches ? [] : ['--no-code-cache'])], { env, stdio: 'ignore' });
    await installDeb(root, await buildDeb(REPO, dist, ['--arch', 'arm64']), path.join(workDir, `${name}-layer`));
    return path.join(workDir, `${name}-layer`, 'upper');
  };
  const rig = { workDir, debian: root, publicKey } as Rig;
  const disks: Record<string, string[]> = {
    'with code caches': [await debLayer('cached', true), emulated, root],
    'without code caches': [await debLayer('uncached', false), emulated, root],
    'key baked in, no agent': [await bakeKey(rig, USER), emulated, root],
  };
  let n = 0;
  const bootOnce = async (name: string, layers: string[]): Promise<Timing> => {
    const agent = !name.startsWith('key baked');
    const m = await createMachine({ name: `bab${process.pid}x${n++}`, workDir, layers, emulated: true, fabric: agent, imdsDocument: imdsDocument(publicKey) });
    const epoch = Date.now();
    const boot = await m.boot();
    try {
      const login = await until('the key login', async () => {
        const r = await boot.ssh(key, USER, 'true', 30_000, ['-o', 'ConnectTimeout=5']);
        return r.exitCode === 0 ? performance.now() - boot.startedAt : null;
      }, 240_000, async () => boot.console().slice(-3000), 200);
      if (!agent) return { login, ready: null, active: null };
      await agentEnded(boot);
      const ready = (await m.requests()).find((r) => r.route === 'health' && r.body.includes('"Ready"'));
      const unit = await show(boot, 'bootstate.service', ['ExecMainStartTimestampMonotonic', 'ActiveEnterTimestampMonotonic']);
      const active = (Number(unit.ActiveEnterTimestampMonotonic) - Number(unit.ExecMainStartTimestampMonotonic)) / 1000;
      return { login, ready: ready ? ready.receivedAt - epoch : null, active };
    } finally {
      await boot.shutdown();
      await m.destroy();
    }
  };
  const samples = await interleave(Object.fromEntries(Object.entries(disks).map(([name, layers]) => [name, () => bootOnce(name, layers)])), RUNS);
  const rows: Row[] = [];
  const floor = samples['key baked in, no agent']!.map((t) => t.login);
  for (const name of ['with code caches', 'without code caches']) {
    const s = samples[name]!;
    rows.push({ metric: `boot → key login, ${name}, under qemu emulation`, median: median(s.map((t) => t.login)), unit: 'ms', floor: median(floor), floorName: 'key baked in, no agent', ratio: median(s.map((t) => t.login)) / median(floor) });
    rows.push({ metric: `boot → Ready, ${name}, under qemu emulation`, median: median(s.map((t) => t.ready!)), unit: 'ms' });
    rows.push({ metric: `bootstate.service start → active, ${name}, under qemu emulation`, median: median(s.map((t) => t.active!)), unit: 'ms' });
  }
  report('arm64-boot', rows, RUNS);
} finally {
  await rm(workDir, { recursive: true, force: true });
  await hold.release();
}
