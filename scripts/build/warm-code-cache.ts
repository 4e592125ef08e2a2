/**
 * Writes the plain program's code caches (scripts/build/program.mjs): runs `provision --scratch` of the built program
 * once against the fake fabric on loopback with BOOTSTATE_CODE_CACHE=write, so the caches hold every function a first
 * boot compiles, then one `report` for the other subcommands' script, one `monitor --once` for the monitor's and one
 * provisioning that exports its trace to a loopback OTLP receiver for the OpenTelemetry script's, and fails the
 * build unless the first reached Ready and exited 0, the second sent its report, the third posted and the fourth's
 * trace arrived.
 * After the entry, the command that runs node, when not this one: another architecture's node under qemu-user
 * writes that architecture's caches (scripts/build/binary.mjs, for the arm64 executable).
 *
 *   node --import tsx scripts/build/warm-code-cache.ts dist/bootstate.mjs [qemu-aarch64-static -L … node]
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startFakeFabric } from '../../src/fabric/fake-fabric.js';

const [entry, ...node] = process.argv.slice(2) as [string, ...string[]];
const [command, ...nodeArgs] = node.length > 0 ? node : [process.execPath];
/** Runs the built program with `args` and `env` through `node`; rejects when it fails. */
const program = (args: string[], env: NodeJS.ProcessEnv) => promisify(execFile)(command!, [...nodeArgs, entry, ...args], { env: { ...process.env, ...env } });
const fabric = await startFakeFabric();
const dir = mkdtempSync(join(tmpdir(), 'bootstate-cache-'));
try {
  const config = join(dir, 'bootstate.toml');
  const q = JSON.stringify;
  writeFileSync(
    config,
    `[imds]\nendpoint = ${q(fabric.imdsUrl)}\n[wireserver]\nhealth_endpoint = ${q(fabric.healthUrl)}\n[data_dir]\npath = ${q(join(dir, 'data'))}\n` +
      `[log_path]\npath = ${q(join(dir, 'bootstate.log'))}\n[telemetry]\nkvp_dir = ${q(join(dir, 'kvp'))}\n`,
  );
  await program(['provision', '--scratch', join(dir, 'root'), '--config', config], { BOOTSTATE_CODE_CACHE: 'write', BOOTSTATE_LOG: 'error' });
  if (!fabric.requestsTo('health').some((r) => r.body.includes('"Ready"'))) throw new Error('the code cache run reported no Ready');
  // The other subcommands' script: one `report`, whose config, logging and HTTP code they share. Without
  // BOOTSTATE_CODE_CACHE=write, so the CLI's cache, which the provisioning run wrote, stays as it is.
  const before = fabric.requestsTo('health').length;
  await program(['report', 'in-progress', '--vm-id', '00000000-0000-4000-8000-000000000001', '--config', config], { BOOTSTATE_LOG: 'error' });
  if (fabric.requestsTo('health').length === before) throw new Error('the code cache run of `report` sent no report');
  // The monitor's script: one timer-started cycle, what runs every minute for the VM's life.
  const monitorConfig = join(dir, 'monitor.toml');
  writeFileSync(
    monitorConfig,
    `[wireserver]\naddress = "127.0.0.1"\n[monitor]\nhealth_service_port = ${fabric.ports.wireserver}\nhost_plugin_port = ${fabric.ports.hostPlugin}\n` +
      `state_file = ${q(join(dir, 'monitor-state.json'))}\n[imds]\nendpoint = ${q(fabric.imdsUrl)}\n[data_dir]\npath = ${q(join(dir, 'data'))}\n` +
      // Nothing of this machine's: its /run, or its DHCP client whatever its hostname does.
      `[log_path]\npath = ""\n[telemetry]\nkvp = false\n[hostname_publishing]\nmonitor = false\n`,
  );
  const posts = fabric.requestsTo('healthService').length;
  await program(['monitor', '--once', '--config', monitorConfig], { BOOTSTATE_LOG: 'error' });
  if (fabric.requestsTo('healthService').length === posts) throw new Error('the code cache run of `monitor --once` posted nothing');
  await warmOtel(config);
} finally {
  await fabric.close();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * The OpenTelemetry script's cache: one more provisioning (a second boot of the same tree is already provisioned, so a
 * fresh one) exporting to a receiver that takes anything. Without BOOTSTATE_CODE_CACHE=write: only the absent cache,
 * the OpenTelemetry script's, is written; a default run's caches stay as the first run left them.
 */
async function warmOtel(config: string): Promise<void> {
  let traces = 0;
  const receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      if (request.url === '/v1/traces') traces += 1;
      response.writeHead(200, { 'content-type': String(request.headers['content-type'] ?? 'application/x-protobuf') }).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    await program(['provision', '--scratch', join(dir, 'otel-root'), '--config', config], { BOOTSTATE_LOG: 'error', OTEL_EXPORTER_OTLP_ENDPOINT: endpoint });
    if (traces === 0) throw new Error('the code cache run exporting its trace sent none');
  } finally {
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
}
