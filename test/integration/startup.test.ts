/**
 * What a provisioning run of the built agent loads and leaves behind
 * (docs/performance.md#why-a-start-costs-what-it-does): none of Node's HTTP/1 or HTTP/2, worker thread or inspector
 * modules, nor crypto, child_process, assert or fs/promises before its first IMDS request, no ES module loader, no
 * other subcommand's script, no flock(1) fork, no addon file, and the plain program's code caches accepted and stored
 * where V8 can read them in place; without the SIMD HTTP parser beside the scripts it falls back to the other one.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';
import { AGENT, runAgent, writeConfig } from './agent.js';
import { VERSION } from '../../src/core/version.js';

let fabric: FakeFabric;
const work = mkdtempSync(join(tmpdir(), 'bootstate-startup-'));
beforeAll(async () => {
  fabric = await startFakeFabric();
});
afterAll(async () => {
  await fabric.close();
  rmSync(work, { recursive: true, force: true });
});

/** A preload that prints, at exit, the built-in modules the process loaded and every program it executed. */
function hook(): string {
  const file = join(work, 'hook.cjs');
  writeFileSync(
    file,
    `process.on('exit', () => require('fs').writeSync(2, 'BUILTINS ' + JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13))) + '\\n'));\n`,
  );
  return file;
}

const builtins = (stderr: string): string[] => JSON.parse(/BUILTINS (.*)/.exec(stderr)?.[1] ?? 'null');

/** A preload that prints, at each socket the process opens, its port and the built-in modules loaded by then. */
function connectHook(): string {
  const file = join(work, 'connect-hook.cjs');
  writeFileSync(
    file,
    `const { Socket } = require('net');\nconst connect = Socket.prototype.connect;\n` +
      `Socket.prototype.connect = function (...args) {\n` +
      `  const target = Array.isArray(args[0]) ? args[0][0] : args[0];\n` +
      `  const port = typeof target === 'object' ? target.port : target;\n` +
      `  require('fs').writeSync(2, 'AT_CONNECT ' + port + ' ' + JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13))) + '\\n');\n` +
      `  return connect.apply(this, args);\n};\n`,
  );
  return file;
}

/**
 * Runs `provision` of `agent` into a fresh root against the fake fabric under strace, tracing `syscalls`, and returns
 * the trace. Asynchronously: the fake fabric answering the agent runs in this process.
 */
async function provisionTraced(syscalls: string, mode: '--dry-run' | '--scratch', agent = AGENT): Promise<string> {
  const root = mkdtempSync(join(work, 'traced-'));
  const trace = join(root, 'strace.out');
  const config = writeConfig(fabric, root, {});
  await promisify(execFile)('strace', ['-f', '-qq', '-e', `trace=${syscalls}`, '-o', trace, process.execPath, agent, 'provision', mode, join(root, 'sys'), '--config', config], {
    env: { ...process.env, BOOTSTATE_LOG: 'error' },
  });
  return readFileSync(trace, 'utf8');
}

describe('a provisioning run of dist/bootstate.mjs', () => {
  it('loads neither HTTP/2, worker threads nor the inspector, and leaves no addon file', async () => {
    if (!existsSync(AGENT)) throw new Error('run npm run build first');
    const run = await runAgent(fabric, { env: { NODE_OPTIONS: `--require ${hook()}` } });
    expect(run.code).toBe(0);
    const loaded = builtins(run.stderr);
    expect(loaded.length).toBeGreaterThan(20);
    // (internal/worker/js_transferable is part of Node's own bootstrap: `node -e 0` loads it too.)
    expect(loaded.filter((m) => /^(http|_http_.*|http2|worker_threads|inspector|wasi|internal\/worker|internal\/http2\/.*)$/.test(m))).toEqual([]);
    // The addon is written, dlopen'ed and unlinked; neither the file nor its directory is left behind.
    expect(readdirSync('/run').filter((name) => name.startsWith('bootstate-native-'))).toEqual([]);
  });

  it('sends its first IMDS request before loading node:crypto, node:child_process, node:assert or node:fs/promises', async () => {
    const run = await runAgent(fabric, { env: { NODE_OPTIONS: `--require ${connectHook()}` } });
    expect(run.code).toBe(0);
    const imdsPort = new URL(fabric.imdsUrl).port;
    const atImds = [...run.stderr.matchAll(/AT_CONNECT (\d+) (.*)/g)].find((m) => m[1] === imdsPort);
    expect(atImds, run.stderr.slice(-2000)).toBeDefined();
    const loaded: string[] = JSON.parse(atImds![2]);
    expect(loaded).toContain('net');
    expect(loaded.filter((m) => /^(crypto|child_process|assert|fs\/promises|internal\/fs\/promises|internal\/crypto\/.*)$/.test(m))).toEqual([]);
  });

  it('runs no flock(1): the locks are taken in-process', async () => {
    const trace = await provisionTraced('execve', '--dry-run');
    const programs = trace.split('\n').map((line) => /execve\("([^"]+)"/.exec(line)?.[1]).filter(Boolean);
    expect(programs.length).toBeGreaterThan(0);
    expect(programs.filter((p) => p!.endsWith('/flock'))).toEqual([]);
  });

  it('answers --version and -V from the loader alone, reading no script, with the CLI\'s line', async () => {
    for (const flag of ['--version', '-V']) {
      const trace = join(work, 'open.trace');
      const out = execFileSync('strace', ['-f', '-qq', '-e', 'trace=openat', '-o', trace, process.execPath, AGENT, flag], { encoding: 'utf8' });
      expect(out).toBe(`bootstate ${VERSION}\n`);
      const opened = readFileSync(trace, 'utf8');
      expect(opened).not.toMatch(/bootstate[a-z-]*\.bundle\.js/);
    }
    // Anything more goes to the CLI, which reads only its own script.
    const trace = join(work, 'open-help.trace');
    execFileSync('strace', ['-f', '-qq', '-e', 'trace=openat', '-o', trace, process.execPath, AGENT, '--help'], { stdio: 'pipe' });
    const opened = readFileSync(trace, 'utf8');
    expect(opened).toContain('bootstate.bundle.js');
    expect(opened).not.toContain('bootstate-provision.bundle.js');
    expect(opened).not.toContain('bootstate-run.bundle.js');
    expect(opened).not.toContain('bootstate-commands.bundle.js');
    const extra = spawnSync(process.execPath, [AGENT, '--version', 'x'], { encoding: 'utf8' });
    expect(extra.status).toBe(2);
    expect(extra.stdout).toBe('');
  });

  it('runs a monitor cycle from the monitor\'s own script, never reading the other subcommands\' or provisioning\'s', () => {
    const config = join(work, 'monitor-cycle.toml');
    // Every endpoint on a loopback port nothing listens on: the cycle measures failures and still runs to its end.
    writeFileSync(
      config,
      '[wireserver]\naddress = "127.0.0.1"\n[monitor]\nhealth_service_port = 9\nhost_plugin_port = 9\n' +
        `state_file = ${JSON.stringify(join(work, 'monitor-state.json'))}\n[imds]\nendpoint = "http://127.0.0.1:9/metadata"\n` +
        `[data_dir]\npath = ${JSON.stringify(join(work, 'monitor-data'))}\n[log_path]\npath = ""\n[telemetry]\nkvp = false\n[hostname_publishing]\nmonitor = false\n`,
    );
    const trace = join(work, 'monitor.trace');
    const cycle = spawnSync('strace', ['-f', '-qq', '-e', 'trace=openat', '-o', trace, process.execPath, AGENT, 'monitor', '--once', '--config', config], { encoding: 'utf8' });
    expect(cycle.stdout).toContain('check(s) failed');
    const opened = readFileSync(trace, 'utf8');
    expect(opened).toContain('bootstate-monitor.bundle.js');
    for (const other of ['bootstate-commands.bundle.js', 'bootstate-provision.bundle.js', 'bootstate-run.bundle.js']) expect(opened).not.toContain(other);
  });

  it('provisions from its own two scripts, never reading the other subcommands\' script', async () => {
    const opened = await provisionTraced('openat', '--scratch');
    expect(opened).toContain('bootstate-provision.bundle.js');
    expect(opened).toContain('bootstate-run.bundle.js');
    // undici's HTTP parser and the native addon come as files beside the scripts, not as base64 inside them.
    expect(opened).toContain('llhttp_simd.wasm');
    expect(opened).toContain(`native-${process.arch}.node`);
    expect(opened).not.toContain('bootstate-commands.bundle.js');
    expect(opened).not.toMatch(/"[^"]*llhttp\.wasm"/);
  });

  it('writes its first IMDS request before it reads the run script (chart, logger, OS steps), then provisions from that request and the VM id and markers read for it', async () => {
    const before = fabric.requestsTo('imds').length;
    const trace = await provisionTraced('openat,write,writev', '--scratch');
    const lines = trace.split('\n');
    const request = lines.findIndex((line) => line.includes('"GET /metadata/instance'));
    const runScript = lines.findIndex((line) => line.includes('bootstate-run.bundle.js"'));
    expect(request).toBeGreaterThan(0);
    expect(runScript).toBeGreaterThan(request);
    // The chart's first IMDS attempt was that request: no second one.
    expect(fabric.requestsTo('imds')).toHaveLength(before + 1);
    // The VM id and the markers (azure-init's among them) are read once, before that request; the chart takes them.
    expect(lines.filter((line) => line.includes('/product_uuid"'))).toHaveLength(1);
    expect(lines.filter((line) => line.includes('"/var/lib/azure-init"'))).toHaveLength(1);
  });

  it('starts through a CommonJS loader: dist/bootstate.mjs is a symlink to it, and Node starts no ES module loader', () => {
    expect(lstatSync(AGENT).isSymbolicLink()).toBe(true);
    const hookFile = join(work, 'esm-hook.cjs');
    writeFileSync(hookFile, `process.on('exit', () => require('fs').writeSync(2, 'ESM ' + JSON.stringify(process.moduleLoadList.filter((m) => m.includes('modules/esm/'))) + '\\n'));\n`);
    const run = spawnSync(process.execPath, ['--require', hookFile, AGENT, '--version'], { encoding: 'utf8' });
    expect(run.stdout).toMatch(/^bootstate /);
    const esm: string[] = JSON.parse(/ESM (.*)/.exec(run.stderr)?.[1] ?? 'null');
    expect(esm).not.toContain('NativeModule internal/modules/esm/loader');
  });

  it('provisions with undici\'s fallback HTTP parser when the SIMD one is missing beside the scripts', async () => {
    const copy = mkdtempSync(join(work, 'dist-'));
    cpSync(dirname(AGENT), copy, { recursive: true, verbatimSymlinks: true, filter: (source) => !/\/(bootstate|bootstate\.blob|deb-root|[^/]+\.deb)$/.test(source) });
    rmSync(join(copy, 'llhttp_simd.wasm'));
    const before = fabric.requestsTo('health').filter((r) => r.body.includes('"Ready"')).length;
    const opened = await provisionTraced('openat', '--scratch', join(copy, 'bootstate.mjs'));
    expect(fabric.requestsTo('health').filter((r) => r.body.includes('"Ready"')).length).toBe(before + 1);
    expect(opened).toMatch(/"[^"]*\/llhttp\.wasm"/);
  });

  it('provisions from its script\'s code cache, leaving an accepted one as it is', async () => {
    const cache = join(dirname(AGENT), 'bootstate-provision.bundle.js.cache');
    // A run with other flags (the preload above) rewrote it for those flags; a run with none makes it ours again.
    expect((await runAgent(fabric)).code).toBe(0);
    const before = statSync(cache).ino;
    expect((await runAgent(fabric)).code).toBe(0);
    expect(statSync(cache).ino).toBe(before);
  });

  it('stores each code cache at a 16-byte boundary after its key line, where V8 reads it without copying it', () => {
    const caches = readdirSync(dirname(AGENT)).filter((name) => name.endsWith('.bundle.js.cache'));
    expect(caches.length).toBe(6);
    for (const name of caches) {
      const bytes = readFileSync(join(dirname(AGENT), name));
      const header = bytes.indexOf(10) + 1;
      expect(header % 16, name).toBe(0);
      expect(bytes.toString('latin1', 0, header - 1).trimEnd()).toMatch(/^\["v20\./);
    }
  });

  it('reads its code cache instead of compiling the bundle', () => {
    const cache = join(dirname(AGENT), 'bootstate.bundle.js.cache');
    expect(existsSync(cache)).toBe(true);
    // A rejected or missing cache is replaced (a new file renamed over it) at exit; an accepted one is left alone.
    const before = statSync(cache).ino;
    execFileSync(process.execPath, [AGENT, '--help'], { stdio: 'pipe' });
    expect(statSync(cache).ino).toBe(before);
    execFileSync(process.execPath, ['--no-opt', AGENT, '--help'], { stdio: 'pipe' });
    expect(statSync(cache).ino).not.toBe(before);
  });
});
