/**
 * What exporting the run's trace costs the boot, A/B in one run: a `--scratch` provisioning with no OTLP endpoint
 * against the same with a collector that takes the trace, one that is down (a closed loopback port) and one that
 * accepts and never answers (the export's 2 s deadline), interleaved. Measured from spawn: the Ready POST arriving,
 * READY=1 arriving at a real sd_notify socket (test/support/notify-receiver.ts) and the process's exit. The export
 * starts after READY=1 and the Ready report, so those two should not move; only the exit pays, at most the deadline.
 *
 *   node --import tsx bench/otlp-export.ts      (node bench/run.mjs --only otlp-export)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downUrl, startOtlpReceiver } from '../test/support/otlp-receiver.js';
import { startNotifyReceiver } from '../test/support/notify-receiver.js';
import { benchConfig, builds, interleave, report, startFabric, versus, type Build, type Fabric, type Row } from './harness.js';

interface Timing {
  ready: number;
  readyNotify: number;
  exit: number;
}

const wallNow = () => performance.timeOrigin + performance.now();

const fabric = await startFabric();
const work = mkdtempSync(join(tmpdir(), 'bootstate-bench-otlp-'));
const notify = await startNotifyReceiver(join(work, 'notify.sock'));
const up = await startOtlpReceiver('ok');
const stalled = await startOtlpReceiver('stall');
const down = await downUrl();

/** One provisioning of `build` with `endpoint` (none: export off), timed from spawn. */
async function timed(build: Build, endpoint: string | null): Promise<Timing> {
  const dir = mkdtempSync(join(work, 'run-'));
  try {
    const config = join(dir, 'bench.toml');
    writeFileSync(config, benchConfig(fabric as Fabric, dir));
    const ready = fabric.expect('health', '"Ready"');
    const start = performance.now();
    const startWall = wallNow();
    const env: NodeJS.ProcessEnv = { ...process.env, BOOTSTATE_LOG: 'error', NOTIFY_SOCKET: notify.address };
    if (endpoint) env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint;
    const child = spawn(build.argv[0]!, [...build.argv.slice(1), 'provision', '--scratch', join(dir, 'root'), '--config', config], { stdio: 'ignore', env });
    const exit = new Promise<number>((resolve, reject) => {
      child.on('exit', (code, signal) => (code === 0 ? resolve(performance.now() - start) : reject(new Error(`${build.name} exited with ${code ?? signal}`))));
    });
    const readyAt = (await ready).at - start;
    const exitMs = await exit;
    const message = await notify.waitFor((m) => m.pid === child.pid && m.lines.includes('READY=1'), 5000);
    return { ready: readyAt, readyNotify: message.wallMs - startWall, exit: exitMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

try {
  const build = builds()[0]!;
  const variants: Record<string, () => Promise<Timing>> = {
    off: () => timed(build, null),
    up: () => timed(build, up.url),
    down: () => timed(build, down),
    stalled: () => timed(build, stalled.url),
  };
  const samples = await interleave(variants);
  const pick = (name: string, key: keyof Timing) => samples[name]!.map((s) => s[key]);
  const rows: Row[] = [];
  const words: Record<string, string> = { up: 'collector up', down: 'collector down', stalled: 'collector stalls (2 s deadline)' };
  for (const name of ['up', 'down', 'stalled']) {
    rows.push(
      versus(`time to READY=1, ${words[name]}`, pick(name, 'readyNotify'), 'no endpoint', pick('off', 'readyNotify'), { target: '≈ 1' }),
      versus(`time to Ready POST, ${words[name]}`, pick(name, 'ready'), 'no endpoint', pick('off', 'ready'), { target: '≈ 1' }),
      versus(`time to exit, ${words[name]}`, pick(name, 'exit'), 'no endpoint', pick('off', 'exit')),
    );
  }
  if (up.traces.length === 0) throw new Error('the collector received no trace');
  report('otlp-export', rows);
} finally {
  await Promise.all([up.close(), stalled.close(), notify.stop(), fabric.close()]);
  rmSync(work, { recursive: true, force: true });
}
