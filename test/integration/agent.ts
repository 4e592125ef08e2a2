/**
 * Runs the built agent (`dist/bootstate.mjs`) as a child process against a fake fabric on loopback, provisioning
 * into a temporary directory with the scratch backend, and reports what happened.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { FakeFabric } from '../../src/fabric/fake-fabric.js';

export const AGENT = resolve('dist/bootstate.mjs');

/** Runs the built CLI asynchronously (a fake fabric may live in the calling process): its exit code and output. */
export async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [AGENT, ...args], { timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

export interface AgentRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit. */
  ms: number;
  root: string;
}

export interface AgentOptions {
  /** Extra TOML appended to the generated config (sections must not repeat the generated ones). */
  imds?: Record<string, number | string | boolean>;
  wireserver?: Record<string, number | string | boolean>;
  /** Keys added to the generated `[telemetry]` table. */
  telemetry?: Record<string, number | string | boolean>;
  extraToml?: string;
  /** Reuse a root from an earlier run (second boot). */
  root?: string;
  args?: string[];
  /** Called once the child is running (tests send signals). */
  onSpawn?(child: import('node:child_process').ChildProcess): void;
  env?: Record<string, string>;
  /** A file descriptor to give the agent as stderr instead of a pipe (then `stderr` stays empty). */
  stderrFd?: number;
  /** What runs the agent instead of node with dist/bootstate.mjs, e.g. an arm64 executable under qemu-user. */
  command?: string[];
}

function toml(section: string, values: Record<string, number | string | boolean>): string {
  const lines = Object.entries(values).map(([k, v]) => `${k} = ${typeof v === 'string' ? JSON.stringify(v) : v}`);
  return `[${section}]\n${lines.join('\n')}\n`;
}

/** Writes a config pointing the agent at `fabric` and everything it writes at `root`. */
export function writeConfig(fabric: FakeFabric, root: string, options: AgentOptions): string {
  const file = join(root, 'bootstate.toml');
  writeFileSync(
    file,
    [
      toml('imds', { endpoint: fabric.imdsUrl, retry_interval_secs: 0.1, total_retry_timeout_secs: 5, ...options.imds }),
      toml('wireserver', { health_endpoint: fabric.healthUrl, retry_interval_secs: 0.1, total_retry_timeout_secs: 5, ...options.wireserver }),
      toml('ssh', { query_sshd_config: false }),
      toml('provisioning_media', { enable: false }),
      toml('telemetry', { kvp_dir: join(root, 'var/lib/hyperv'), ...options.telemetry }),
      toml('data_dir', { path: join(root, 'var/lib/bootstate') }),
      toml('log_path', { path: join(root, 'var/log/bootstate.log') }),
      options.extraToml ?? '',
    ].join('\n'),
  );
  return file;
}

/** Runs `bootstate provision --scratch ROOT --config ROOT/bootstate.toml` and waits for it to exit. */
export async function runAgent(fabric: FakeFabric, options: AgentOptions = {}): Promise<AgentRun> {
  if (!options.command && !existsSync(AGENT)) throw new Error(`${AGENT} is missing: run npm run build first`);
  const root = options.root ?? mkdtempSync(join(tmpdir(), 'bootstate-it-'));
  mkdirSync(root, { recursive: true });
  const config = writeConfig(fabric, root, options);
  const started = performance.now();
  const [command, ...prefix] = options.command ?? [process.execPath, AGENT];
  const child = spawn(command!, [...prefix, 'provision', '--scratch', root, '--config', config, ...(options.args ?? [])], {
    stdio: ['ignore', 'pipe', options.stderrFd ?? 'pipe'],
    env: { ...process.env, BOOTSTATE_LOG: 'warn', ...options.env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  options.onSpawn?.(child);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done) => child.on('exit', (c, s) => done([c, s])));
  return { code, signal, stdout, stderr, ms: performance.now() - started, root };
}

/** The marker files the run left in its data directory. */
export function markers(root: string): string[] {
  const dir = join(root, 'var/lib/bootstate');
  return existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith('.provisioned') || n.endsWith('.report-pending')) : [];
}

/** The health reports the fabric received, as `state` or `state/subStatus`. */
export function reportKinds(fabric: FakeFabric): string[] {
  return (fabric.reports as Array<{ state: string; details?: { subStatus?: string } }>).map((r) =>
    r.details?.subStatus ? `${r.state}/${r.details.subStatus}` : r.state,
  );
}

/** The encoded failure report (description) of the last ProvisioningFailed report. */
export function lastFailureDescription(fabric: FakeFabric): string | undefined {
  const reports = fabric.reports as Array<{ details?: { subStatus?: string; description?: string } }>;
  return reports.filter((r) => r.details?.subStatus === 'ProvisioningFailed').at(-1)?.details?.description;
}
