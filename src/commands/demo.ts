/**
 * `bootstate demo`: a whole first boot on this machine without changing it. An embedded fake fabric (IMDS and
 * wireserver) listens on loopback; the agent provisions into a scratch directory with the dry-run backend,
 * printing each state it enters with its timing, and ends by writing the run's trace page.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../config/defaults.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { startFakeFabric, type FakeFabric } from '../fabric/fake-fabric.js';
import { createLogger } from '../logging/log.js';
import { runProvision } from '../provision/provision.js';
import { listFiles, shellCommand } from '../logging/run-output.js';
import { statePrinter } from '../observe/console.js';

/** Runs the demo and resolves to its exit code (the provisioning run's). */
export async function runDemo(values: { dir?: unknown; monitor?: unknown; pps?: unknown }, out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<number> {
  const root = (values.dir as string | undefined) ?? mkdtempSync(join(tmpdir(), 'bootstate-demo-'));
  mkdirSync(join(root, 'sys/class/dmi/id'), { recursive: true });
  mkdirSync(join(root, 'sys/firmware/efi'), { recursive: true });
  writeFileSync(join(root, 'sys/class/dmi/id/product_uuid'), `${randomUUID()}\n`);
  const fabric = await startFakeFabric();
  // --pps: a pool VM that reports Ready to the pool, then waits until a customer claims it at the third poll.
  if (values.pps) fabric.setPreprovisioned({ type: 'Running', claimAtPoll: 3 });
  out(`bootstate demo: fake IMDS at ${fabric.imdsUrl}, wireserver at ${fabric.healthUrl}${values.pps ? ' (pre-provisioned pool VM, claimed at the 3rd poll)' : ''}`);
  out(`provisioning into ${root} (dry run: this machine is not changed)\n`);

  const inspect = statePrinter(out);

  const adjust = (config: Config): Config => ({
    ...config,
    imds: { ...config.imds, endpoint: fabric.imdsUrl, retry_interval_secs: 0.2, total_retry_timeout_secs: 10 },
    wireserver: { ...config.wireserver, health_endpoint: fabric.healthUrl, retry_interval_secs: 0.2, total_retry_timeout_secs: 10 },
    ssh: { ...config.ssh, query_sshd_config: false },
    provisioning_media: { ...config.provisioning_media, enable: false },
    preprovisioning: { ...config.preprovisioning, poll_interval_secs: 0.2 },
    telemetry: { ...config.telemetry, kvp_dir: join(root, 'var/lib/hyperv') },
    data_dir: { path: join(root, 'var/lib/bootstate') },
    log_path: { path: join(root, 'var/log/bootstate.log') },
  });

  try {
    const result = await runProvision({
      systemConfigFile: join(root, 'etc/bootstate/bootstate.toml'),
      dropinDir: join(root, 'etc/bootstate/bootstate.toml.d'),
      adjustConfig: adjust,
      scratchDir: root,
      sysRoot: root,
      inspect,
      stderr: { write: () => true },
    });
    out('');
    out(`result: ${result.result}${result.reason ? ` (${result.reason})` : ''}, exit code ${result.exitCode}`);
    const reports = fabric.reports as Array<{ state: string; details?: { subStatus?: string } }>;
    out(`reports received by the fabric: ${reports.map((r) => r.state + (r.details?.subStatus ? `/${r.details.subStatus}` : '')).join(', ')}`);
    out('\ncommands the real backend would have run:');
    for (const command of result.commands) out(`  ${shellCommand(command)}`);
    out(`\nfiles written under ${root}:`);
    for (const line of listFiles(root, ['sys'])) out(`  ${line}`);
    if (result.journalPath) {
      const { writeTrace } = await import('../inspect/render.js');
      const trace = await writeTrace({ journal: result.journalPath, dataDir: result.config.data_dir.path, output: join(root, 'trace.html') });
      out(`\ntrace of this run (open in a browser): ${trace.path}`);
    }
    if (result.exitCode !== 0) return result.exitCode;
    return values.monitor === true ? await demoMonitor(fabric, result.config, out) : EXIT_OK;
  } finally {
    await fabric.close();
  }
}

/** `demo --monitor`: one `monitor --once` against the embedded fabric, with its summary. */
async function demoMonitor(fabric: FakeFabric, config: Config, out: (line: string) => void): Promise<number> {
  const { runMonitor } = await import('../monitor/run.js');
  const { MonitorSummary } = await import('../monitor/summary.js');
  const { log, close } = createLogger({ logPath: '', stderr: { write: () => true } as never });
  const summary = new MonitorSummary();
  out('\nbootstate monitor --once against the same fabric:');
  try {
    const result = await runMonitor({
      config,
      once: true,
      log,
      onUnhealthy: () => {},
      onMeasured: (name, measurement) => summary.measured(name, measurement),
      onPosted: (batch, outcome) => summary.posted(batch, outcome),
      endpoints: { healthService: fabric.healthServiceUrl, hostPlugin: fabric.hostPluginUrl, imds: new URL(fabric.imdsUrl).origin },
      handleSignals: false,
    });
    for (const line of summary.lines(fabric.healthServiceUrl)) out(`  ${line}`);
    return result.exitCode !== EXIT_OK ? result.exitCode : summary.failed ? EXIT_FAILURE : EXIT_OK;
  } finally {
    close();
  }
}
