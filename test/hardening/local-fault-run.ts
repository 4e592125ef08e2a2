/**
 * Runs one local-fault case: a scratch tree (`--scratch`) with the fault planted, the built agent in its own mount namespace
 * (where a full or read-only file system is a small tmpfs or a read-only bind mount that only it sees), a fake
 * fabric on loopback, and victim files whose bytes and inode numbers are compared before and after.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { MAX_RECORDS, encodeRecords } from '../../src/kvp/codec.js';
import { startFakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT, reportKinds, writeConfig } from '../integration/agent.js';
import type { LocalCase } from './local-fault-cases.js';
import { limitConcurrency } from './slots.js';

export interface LocalObserved {
  exitCode: number | null;
  signal: string | null;
  result: string | null;
  reason: string | null;
  reports: string[];
  kvpReport: string | null;
  sinksOff: string[];
  /** Log lines telling that a sink was turned off (one per sink is expected). */
  sinkNotes: number;
  /** Victim files whose bytes or inode changed, or that disappeared. */
  victimsChanged: string[];
  /** stderr lines that look like a crash. */
  crashLines: string[];
  ms: number;
}

const VICTIM_TEXT = 'victim: owned by someone else, must never change\n';
const CRASH = /uncaught|unhandled|^\s+at .+:\d+:\d+\)?$/im;

/** The VM id the agent reads on this machine, so the marker case plants the name the agent looks for. */
export function vmIdOf(): string {
  try {
    return readFileSync('/sys/class/dmi/id/product_uuid', 'utf8').trim().toLowerCase();
  } catch {
    return '00000000-0000-0000-0000-000000000000';
  }
}

interface Victim {
  path: string;
  ino: number;
  bytes: Buffer;
}

function victim(path: string, text = VICTIM_TEXT): Victim {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  return { path, ino: statSync(path).ino, bytes: Buffer.from(text) };
}

function changed(v: Victim): boolean {
  try {
    return statSync(v.path).ino !== v.ino || !readFileSync(v.path).equals(v.bytes);
  } catch {
    return true;
  }
}

/** Shell run inside the case's mount namespace before the agent: full and read-only file systems. */
const ENTER = `set -eu
kind=$1 target=$2; shift 2
case $kind in
  full)
    mount -t tmpfs -o size=64k,mode=0755 bootstate-full "$target"
    dd if=/dev/zero of="$target/.fill" bs=4k 2>/dev/null || true ;;
  'no free inodes')
    mount -t tmpfs -o size=1m,nr_inodes=8,mode=0755 bootstate-full "$target"
    i=0; while touch "$target/.fill$i" 2>/dev/null; do i=$((i+1)); done ;;
  read-only)
    mount --bind "$target" "$target"
    mount -o remount,bind,ro "$target" ;;
esac
exec "$@"`;

/** Agents running at once, each in its own namespace. */
const inSlot = limitConcurrency(Number(process.env.LOCAL_FAULT_CONCURRENCY ?? 4));

export function runLocalCase(c: LocalCase): Promise<LocalObserved> {
  return inSlot(() => observe(c));
}

async function observe(c: LocalCase): Promise<LocalObserved> {
  const fabric = await startFakeFabric();
  const root = mkdtempSync(join(tmpdir(), 'bootstate-local-'));
  try {
    const config = writeConfig(fabric, root, {
      imds: { total_retry_timeout_secs: 5, request_timeout_secs: 2 },
      wireserver: { total_retry_timeout_secs: 5, read_timeout_secs: 2 },
      extraToml: '[user_provisioners]\npasswordless_sudo = true\n',
    });
    const victims = [victim(join(root, 'victim/dir/precious.txt')), victim(join(root, 'victim/file.txt'))];
    const target = join(root, c.target.path.replace('{vm}', vmIdOf()));
    const dropCaps = plant(c, target, root, victims);

    const nsArgs = ['--mount', '--propagation', 'private', '--fork', '--kill-child'];
    // Config cases could fall back to the defaults, which name the real fabric: they get an empty network too.
    if (c.target.role === 'config') nsArgs.push('--net');
    const caps = dropCaps ? ['setpriv', '--inh-caps=-dac_override,-dac_read_search', '--bounding-set=-dac_override,-dac_read_search'] : [];
    const argv = [
      'unshare', ...nsArgs, 'sh', '-c', ENTER, 'local-fault', c.fault, target,
      ...caps, process.execPath, AGENT, 'provision', '--scratch', root, '--config', config,
    ];
    const started = performance.now();
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, BOOTSTATE_LOG: 'info', BOOTSTATE_CONFIG: '' } });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done) => child.on('close', (code, sig) => done([code, sig])));
    clearTimeout(killer);
    const ms = performance.now() - started;

    const summary = stderr
      .split('\n')
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      })
      .filter((line) => typeof line.msg === 'string' && /^provisioning (finished|failed)/.test(line.msg as string))
      .at(-1);
    const dryRunStop = /dry run not started/.test(stderr);
    return {
      exitCode,
      signal,
      result: (summary?.result as string) ?? (dryRunStop ? 'failed' : null),
      reason: (summary?.reason as string) ?? (dryRunStop ? 'failed to load config' : null),
      reports: reportKinds(fabric),
      kvpReport: (summary?.kvpReport as string) ?? null,
      sinksOff: (summary?.sinksOff as string[]) ?? [],
      sinkNotes: stderr.split('\n').filter((line) => line.includes('"step":"sinks"')).length,
      victimsChanged: victims.filter(changed).map((v) => v.path.slice(root.length)),
      crashLines: stderr.split('\n').filter((line) => CRASH.test(line)),
      ms,
    };
  } finally {
    await fabric.close();
    rmSync(root, { recursive: true, force: true });
  }
}

/** Plants the fault on the host side (everything but mounts); returns whether the agent runs without DAC override. */
function plant(c: LocalCase, target: string, root: string, victims: Victim[]): boolean {
  const [dirVictim, fileVictim] = victims as [Victim, Victim];
  mkdirSync(dirname(target), { recursive: true });
  if (c.target.role === 'config' && c.fault !== 'permission denied') rmSync(target);
  switch (c.fault) {
    case 'none':
      return false;
    case 'full':
    case 'no free inodes':
    case 'read-only':
      mkdirSync(target, { recursive: true });
      return false;
    case 'wrong type':
      if (c.target.kind === 'dir') victims.push(victim(target));
      else {
        mkdirSync(target);
        victims.push(victim(join(target, 'inside.txt')));
      }
      return false;
    case 'symlink to victim':
      symlinkSync(c.target.kind === 'dir' ? dirname(dirVictim.path) : fileVictim.path, target);
      return false;
    case 'hard link to victim':
      linkSync(fileVictim.path, target);
      return false;
    case 'fifo':
      spawnSyncOk('mkfifo', [target]);
      return false;
    case 'permission denied':
      if (c.target.kind === 'dir') mkdirSync(target, { recursive: true });
      else if (c.target.role === 'config') victims.push(victim(target, readFileSync(join(root, 'bootstate.toml'), 'utf8')));
      else victims.push(victim(target));
      chmodSync(target, 0);
      return true;
    case 'torn pool':
      victims.push(victim(target, 'x'.repeat(1000)));
      return false;
    case 'pool full of foreign records': {
      const records = Array.from({ length: MAX_RECORDS }, (_, i) => ({ key: `CLOUD_INIT|${i}`, value: 'foreign' }));
      writeFileSync(target, encodeRecords(records));
      victims.push({ path: target, ino: statSync(target).ino, bytes: readFileSync(target) });
      return false;
    }
  }
}

function spawnSyncOk(command: string, args: string[]): void {
  const { status, stderr } = spawnSync(command, args, { encoding: 'utf8' });
  if (status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${stderr}`);
}
