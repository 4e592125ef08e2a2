/**
 * A provisioning run builds the provisioning chart's StateNode tree once, with its real actors: importing the
 * provision path builds no chart (the placeholder-built `provisioningMachine` is never evaluated), and the run builds
 * exactly the machine it runs. Each build of the tree is paid before the first IMDS request.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { StateNode, type AnyActorLogic, type AnyActor, type AnyStateMachine, type InspectionEvent } from 'xstate';
import type { Config } from '../../src/config/defaults.js';
import { startFakeFabric, type FakeFabric } from '../../src/fabric/fake-fabric.js';

let fabric: FakeFabric | null = null;
let root: string | null = null;
afterEach(async () => {
  vi.restoreAllMocks();
  await fabric?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** Every machine whose tree is built from now on: a machine's constructor initializes its root node once. */
function recordBuilds(): AnyStateMachine[] {
  const built: AnyStateMachine[] = [];
  const prototype = StateNode.prototype as unknown as { _initialize(): void };
  const initialize = prototype._initialize;
  vi.spyOn(prototype, '_initialize').mockImplementation(function (this: StateNode) {
    if (this.parent === undefined) built.push(this.machine as unknown as AnyStateMachine);
    initialize.call(this);
  });
  return built;
}

const provisioningBuilds = (built: AnyStateMachine[]) => built.filter((machine) => machine.id === 'provisioning');

it('provisions with one build of the chart, the one it runs, and none at import', async () => {
  root = mkdtempSync(join(tmpdir(), 'bootstate-chart-once-'));
  mkdirSync(join(root, 'sys/class/dmi/id'), { recursive: true });
  writeFileSync(join(root, 'sys/class/dmi/id/product_uuid'), `${randomUUID()}\n`);
  fabric = await startFakeFabric();
  const { imdsUrl, healthUrl } = fabric;
  const dir = root;

  vi.resetModules();
  const built = recordBuilds();
  const { runProvision } = await import('../../src/provision/provision.js');
  expect(provisioningBuilds(built), 'charts built by importing the provision path').toEqual([]);

  const ran: AnyActorLogic[] = [];
  const result = await runProvision({
    systemConfigFile: join(dir, 'etc/bootstate/bootstate.toml'),
    dropinDir: join(dir, 'etc/bootstate/bootstate.toml.d'),
    adjustConfig: (config: Config): Config => ({
      ...config,
      imds: { ...config.imds, endpoint: imdsUrl, retry_interval_secs: 0.1, total_retry_timeout_secs: 10 },
      wireserver: { ...config.wireserver, health_endpoint: healthUrl, retry_interval_secs: 0.1, total_retry_timeout_secs: 10 },
      ssh: { ...config.ssh, query_sshd_config: false },
      provisioning_media: { ...config.provisioning_media, enable: false },
      telemetry: { ...config.telemetry, kvp_dir: join(dir, 'var/lib/hyperv') },
      data_dir: { path: join(dir, 'var/lib/bootstate') },
      log_path: { path: join(dir, 'var/log/bootstate.log') },
    }),
    scratchDir: dir,
    sysRoot: dir,
    stderr: { write: () => true },
    inspect: (event: InspectionEvent) => {
      if (event.type === '@xstate.actor' && event.actorRef.sessionId === event.rootId) ran.push((event.actorRef as AnyActor).logic);
    },
  });

  expect(result.result, result.reason).toBe('provisioned');
  expect((fabric.reports as Array<{ state: string }>).map((r) => r.state)).toContain('Ready');
  expect(ran).toHaveLength(1);
  const builds = provisioningBuilds(built);
  expect(builds).toHaveLength(1);
  expect(builds[0]).toBe(ran[0]);

  // The counter sees a build made by importing a module: the placeholder-built machine, imported on purpose.
  const { provisioningMachine } = await import('../../machines/provisioning-machine.js');
  expect(provisioningBuilds(built)).toEqual([builds[0], provisioningMachine]);
});
