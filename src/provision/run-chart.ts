/**
 * The second half of a provisioning run, loaded by provision.ts once the config is loaded, the instance lock taken,
 * the VM id and its marker read and, on a first boot, the first IMDS request sent: puts the run together
 * (compose.ts: logging, KVP, the journal and the other observers, the chart with the real actors and what was read
 * as its input), runs the chart to its final state, says how it ended, and tears the run down.
 */
import { toPromise } from 'xstate';
import { HEALTH_FAILED, ZERO_VM_ID, type ProvisioningContext, type ProvisioningOutput } from '../../machines/provisioning.js';
import { closeAll } from '../azure/http.js';
import type { Config } from '../config/defaults.js';
import { EXIT_FAILURE, toFailure, type Failure } from '../core/errors.js';
import { scrubData } from '../core/secrets.js';
import { ScratchProvisioner } from '../os/scratch.js';
import { exportTrace, runResource } from '../observe/trace-export.js';
import type { SdNotifier } from '../system/sd-notify.js';
import { composeRun, type ComposedRun } from './compose.js';
import type { BeforeChart, ProvisionOptions, ProvisionResult } from './types.js';

/** Runs the provisioning chart over what the first half read (`before`) and returns how the run ended. */
export async function runProvisioningChart(options: ProvisionOptions, before: BeforeChart): Promise<ProvisionResult> {
  const run = await composeRun(options, before);
  const output = await runToEnd(run, before);
  logOutcome(run, output);
  const journalPath = await tearDown(run, before, output);
  return {
    ...output,
    journalPath,
    config: before.config,
    commands: run.provisioner instanceof ScratchProvisioner ? run.provisioner.commands : [],
    sinksOff: run.sinks.off,
    kvpReport: run.kvpReport,
  };
}

/** Starts the chart and waits for its final state; a chart that throws (a bug) gets the last-resort report. */
async function runToEnd(run: ComposedRun, { config, signals }: BeforeChart): Promise<ProvisioningOutput> {
  const { actor, log } = run;
  try {
    actor.start();
    // A signal caught before the chart existed ends it now, through the same failure report.
    signals?.deliverTo(() => actor.send({ type: 'TERMINATE' }));
    return await toPromise(actor);
  } catch (error) {
    // The chart handles every actor error itself; reaching here is a bug. The fabric must still hear of it.
    const failure = toFailure(error);
    log.fatal({ reason: failure.reason }, `unhandled error: ${(error as Error)?.message ?? String(error)}`);
    const reported = await reportLastResort(run, config, finalContext(run)?.vmId ?? ZERO_VM_ID, failure);
    return { result: 'failed', exitCode: EXIT_FAILURE, reason: failure.reason, code: failure.code, reported };
  } finally {
    signals?.stop();
  }
}

/** The chart's context as it ended; parts of it may be missing when the chart threw. */
function finalContext(run: ComposedRun): Partial<ProvisioningContext> | undefined {
  return run.actor.getSnapshot().context;
}

/**
 * The end of the run in the log: what the chart noted but did not fail on (an unreadable provisioning media, a KVP
 * writer that stopped), then the summary — for a failed boot, what failed, while doing what, and the facts behind it.
 */
function logOutcome(run: ComposedRun, output: ProvisioningOutput): void {
  const { log, sinks } = run;
  const context = finalContext(run);
  for (const warning of context?.warnings ?? []) log.warn({ step: 'provision' }, warning);
  const summary = {
    result: output.result, reason: output.reason, code: output.code, exitCode: output.exitCode, reported: output.reported,
    kvpReport: run.kvpReport, sinksOff: sinks.off.map((s) => s.sink), sinkWritesLost: sinks.lost,
  };
  if (output.result === 'failed') {
    const recorded = context?.failure ?? context?.reportFailure;
    const cause = recorded ? { ...recorded, data: scrubData(run.secrets, recorded.data) } : undefined;
    const detail = cause ? Object.fromEntries(factsOf(cause)) : undefined;
    // The journal's one line about a failed boot: what failed, while doing what, and the facts behind it.
    const during = !context?.failure && context?.reportFailure ? ' while reporting Ready' : '';
    log.error({ ...summary, detail }, `provisioning failed: ${output.reason}${during}${cause ? inParentheses(factsOf(cause)) : ''}`);
    return;
  }
  if (context?.plan?.source === 'media' && context.imdsFailure) {
    const device = context.media?.device ?? 'the provisioning media';
    log.warn(
      { step: 'imds', reason: context.imdsFailure.reason, device },
      `IMDS failed: ${context.imdsFailure.reason}${inParentheses(factsOf(context.imdsFailure))}; provisioned from the provisioning media on ${device} instead`,
    );
  }
  log.info(summary, `provisioning finished: ${output.result}`);
}

/**
 * Flushes KVP, waits for media reads still unmounting, clears the secrets, closes the journal and the live feed,
 * releases the instance lock, tells systemd READY=1, exports the trace (when configured) and closes the log; returns
 * where the journal is.
 */
async function tearDown(run: ComposedRun, { first, lock, facts }: BeforeChart, output: ProvisioningOutput): Promise<string | null> {
  run.observers.flushTelemetry();
  run.sinks.observer('kvp telemetry', () => run.kvp?.flush())();
  await writeDiagnostics(run, output, facts.vmId);
  // A media read the chart stopped waiting for may still be unmounting; exiting under it would leave a mount.
  await Promise.all(run.mediaReads);
  run.secrets.clear();
  const journalPath = await run.observers.close();
  first?.drop();
  await closeAll();
  lock.instance?.release();
  await readyBeforeExit(run.systemd);
  await sendTrace(run, output);
  run.closeLog();
  return journalPath;
}

/**
 * The boot timeline and, on a failure, the kernel log's tail and the failing step's diagnostics into KVP, once, after
 * READY=1 and the report (the chart sent both), with the secrets still known so they can be scrubbed out.
 */
async function writeDiagnostics(run: ComposedRun, output: ProvisioningOutput, vmIdRead: string | null | undefined): Promise<void> {
  const { diagnostics, kvp, log, sinks } = run;
  if (!diagnostics || !kvp || !sinks.isOn('boot diagnostics')) return;
  const context = finalContext(run);
  const failure = output.result === 'failed' ? (context?.failure ?? context?.reportFailure ?? undefined) : undefined;
  const scrubber = run.secrets.scrubber();
  try {
    const ending = { vmId: context?.vmId ?? vmIdRead ?? ZERO_VM_ID, result: output.result, ...(failure ? { failure } : {}) };
    const written = await diagnostics.write(kvp.store, ending, scrubber);
    const note = written.note ? `; ${written.note}` : '';
    log.info({ step: 'diagnostics', records: written.records, ms: Math.round(written.ms * 10) / 10 }, `boot diagnostics: ${written.records} KVP records in ${written.ms.toFixed(1)} ms${note}`);
  } catch (error) {
    log.warn({ step: 'diagnostics' }, `boot diagnostics not written to KVP: ${(error as Error).message}`);
  } finally {
    scrubber.wipe();
  }
}

/**
 * The run's trace to the configured collector, once READY=1 and the Ready report are behind it: bounded by its own
 * deadline, and a collector that fails costs one warning.
 */
async function sendTrace(run: ComposedRun, output: ProvisioningOutput): Promise<void> {
  if (!run.trace || !run.sinks.isOn('trace')) return;
  const context = finalContext(run);
  const spans = run.trace.recorder.finish(output, context?.failure ?? context?.reportFailure ?? undefined);
  const outcome = await exportTrace(spans, runResource(context?.vmId, context?.metadata?.placement), run.trace.settings);
  if ('failed' in outcome) run.log.warn({ step: 'trace' }, `trace not exported: ${outcome.failed}`);
  else run.log.debug({ step: 'trace', spans: outcome.sent }, `trace exported: ${outcome.sent} spans`);
}

/**
 * The safety net under the chart's tellSystemdReady: a Type=notify process that exits without READY=1 fails its
 * start, whatever its exit code says.
 */
async function readyBeforeExit(systemd: SdNotifier): Promise<void> {
  systemd.ready();
  await systemd.flush();
}

/** A failure's supporting data without the stack, as key/value pairs. */
function factsOf(failure: Failure): Array<[string, string]> {
  return failure.data.filter(([key]) => key !== 'stack_base64');
}

/** ` (key=value, …)`, or nothing when there are no facts. */
function inParentheses(facts: Array<[string, string]>): string {
  return facts.length > 0 ? ` (${facts.map(([key, value]) => `${key}=${value}`).join(', ')})` : '';
}

/** One failure report outside the chart (KVP, then one HTTP attempt bounded by 10 s); whether it was accepted. */
async function reportLastResort({ reporter, reports, kvp, log }: ComposedRun, config: Config, vmId: string, failure: Failure): Promise<boolean> {
  const description = reports.failure(failure, vmId);
  if (kvp && !kvp.writeReport(description)) log.error({ step: 'kvp', reason: 'kvp report not written' }, `KVP report not written: ${kvp.lastError}`);
  try {
    await reporter.post({ config: config.wireserver, health: HEALTH_FAILED, vmId, description, signal: AbortSignal.timeout(10_000), log });
    return true;
  } catch {
    return false;
  }
}
