/**
 * What a VM nobody can log in to tells the host about its boot, through the KVP pool (docs/kvp.md#boot-diagnostics):
 * the boot timeline — firmware, loader, initrd and user space from systemd's manager, the agent's start, READY=1 and
 * the fabric accepting the report — and, on a failure (and on Ready with `on_ready`), the kernel log's tail and the
 * failing step's diagnostics, scrubbed of the run's secrets, compressed and split (src/kvp/diagnostics.ts).
 *
 * Nothing here is on the way to READY=1 or the report: systemd's timestamps are asked for (one `systemctl show`) while
 * the chart runs, the moments are noted as they pass, and the records are written once, when the run tears down.
 */
import { randomUUID } from '../core/random.js';
import type { Config } from '../config/defaults.js';
import type { Failure } from '../core/errors.js';
import type { SecretScrubber } from '../core/secrets.js';
import type { InspectionEvent, StateValue } from 'xstate';
import { activePaths } from '../core/state-path.js';
import { causeOf } from '../inspect/projection.js';
import type { KvpRecord } from '../kvp/codec.js';
import { packText, timelineRecord } from '../kvp/diagnostics.js';
import type { KvpStore } from '../kvp/store.js';
import { run as runCommand, type Runner } from '../system/exec.js';
import { readKernelLogTail, type KernelLogTail } from './kernel-log.js';
import { sinceStartMs } from '../core/clock.js';

/** systemd's manager timestamps (µs of CLOCK_MONOTONIC; firmware and loader count back from the kernel's start). */
const MANAGER_PROPERTIES = ['FirmwareTimestampMonotonic', 'LoaderTimestampMonotonic', 'InitRDTimestampMonotonic', 'UserspaceTimestampMonotonic'];
const MANAGER_FIELDS: Record<string, string> = {
  FirmwareTimestampMonotonic: 'firmware_ms', LoaderTimestampMonotonic: 'loader_ms', InitRDTimestampMonotonic: 'initrd_ms', UserspaceTimestampMonotonic: 'userspace_ms',
};
/** Parts the failing step's text may take at most; the kernel log has the rest. */
const STEP_PARTS = 8;

export type DiagnosticsSettings = Config['boot_diagnostics'];

/** Milliseconds of CLOCK_MONOTONIC (systemd's clock for these timestamps), e.g. 8123.4. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

const ms = (value: number) => value.toFixed(1);

/** `systemctl show` of the manager, as timeline fields; a failure is one field saying so. */
export async function managerTimestamps(runner: Runner): Promise<Array<[string, string]>> {
  try {
    const result = await runner(['systemctl', 'show', `--property=${MANAGER_PROPERTIES.join(',')}`], { timeoutMs: 5000, allowFailure: true });
    if (result.exitCode !== 0) return [['systemd', `systemctl exited ${result.exitCode ?? result.signal}`]];
    const fields: Array<[string, string]> = [];
    for (const line of result.stdout.split('\n')) {
      const [name, value] = line.split('=');
      if (name && MANAGER_FIELDS[name] && /^\d+$/.test(value ?? '')) fields.push([MANAGER_FIELDS[name]!, ms(Number(value) / 1000)]);
    }
    return fields;
  } catch (error) {
    return [['systemd', `systemctl not run: ${(error as Error).message}`.slice(0, 80)]];
  }
}

/** What the run ended with, as the writer needs it. */
export interface RunEnding {
  vmId: string;
  result: string;
  failure?: Failure;
}

/** What was written: records, cost in ms, and whether the pool's room cut anything. */
export interface DiagnosticsWritten {
  records: number;
  ms: number;
  note: string;
}

export class BootDiagnostics {
  readonly #settings: DiagnosticsSettings;
  readonly #manager: Promise<Array<[string, string]>> | null;
  readonly #unitStart: number;
  #readyAt: number | null = null;
  #accepted: [string, number] | null = null;

  constructor(settings: DiagnosticsSettings, options: { underSystemd: boolean; runner?: Runner }) {
    this.#settings = settings;
    this.#unitStart = monotonicMs() - sinceStartMs();
    // Asked for now, answered while the chart runs: nothing waits for it before the run tears down.
    this.#manager = options.underSystemd ? managerTimestamps(options.runner ?? runCommand) : null;
  }

  /** READY=1 went out (the first call counts). */
  noteReady(): void {
    this.#readyAt ??= monotonicMs();
  }

  /** An XState `inspect` observer: notes when the fabric accepted the Ready or the failure report. */
  inspect(event: InspectionEvent): void {
    if (this.#accepted || event.type !== '@xstate.snapshot' || event.actorRef.sessionId !== event.rootId) return;
    const value = (event.snapshot as { value?: StateValue }).value;
    if (value === undefined) return;
    const paths = activePaths(value);
    if (paths.includes('markingProvisioned') || paths.includes('provisioned')) this.#accepted = ['ready', monotonicMs()];
    else if (paths.includes('failed')) this.#accepted = ['failure', monotonicMs()];
  }

  /** The timeline's fields known now, the diagnostics' outcome appended by the writer. */
  async #timeline(ending: RunEnding): Promise<Array<[string, string]>> {
    const fields: Array<[string, string]> = [['result', ending.result]];
    fields.push(...((await this.#manager) ?? [['systemd', 'not under systemd']]));
    fields.push(['unit_start_ms', ms(this.#unitStart)]);
    if (this.#readyAt !== null) fields.push(['ready1_ms', ms(this.#readyAt)]);
    if (this.#accepted) fields.push([`${this.#accepted[0]}_accepted_ms`, ms(this.#accepted[1])]);
    return fields;
  }

  /**
   * Writes the run's diagnostics to `store` under one lock, within `max_records` and never leaving fewer than
   * `leave_free` records free; the texts are passed through `scrubber` before they are compressed.
   */
  async write(store: KvpStore, ending: RunEnding, scrubber: SecretScrubber): Promise<DiagnosticsWritten> {
    const started = sinceStartMs();
    const fields = await this.#timeline(ending);
    const wantsTexts = ending.failure !== undefined || (this.#settings.on_ready && ending.result === 'provisioned');
    const kernel = wantsTexts ? readKernelLogTail(this.#settings.kernel_log) : null;
    const step = ending.failure ? scrubber.scrub(stepText(ending.failure)) : null;
    const kernelText = kernel && 'text' in kernel ? scrubber.scrub(kernel.text) : null;
    const ids = { vmId: ending.vmId, run: randomUUID().slice(0, 8) };
    let note = '';
    const result = store.appendFitting((room) => {
      const plan = buildRecords({ ids, fields, step, kernel, kernelText, budget: Math.min(this.#settings.max_records, room - this.#settings.leave_free) });
      note = plan.note;
      return plan.records;
    });
    return { records: result.written, ms: sinceStartMs() - started, note };
  }
}

/** The failing step in words: its code and reason, the journal's cause line, then its data, stderr last. */
export function stepText(failure: Failure): Buffer {
  const lines = [`code: ${failure.code}`, `reason: ${failure.reason}`, `cause: ${causeOf(failure)}`];
  let stderr: string | undefined;
  for (const [key, value] of failure.data) {
    if (key === 'stack_base64') continue;
    if (key === 'stderr') stderr = value;
    else lines.push(`${key}: ${value}`);
  }
  if (stderr !== undefined) lines.push('stderr:', stderr.replace(/\n+$/, ''));
  return Buffer.from(`${lines.join('\n')}\n`);
}

interface Plan {
  ids: { vmId: string; run: string };
  fields: Array<[string, string]>;
  step: Buffer | null;
  kernel: KernelLogTail | null;
  kernelText: Buffer | null;
  budget: number;
}

/** The records within `budget`: the timeline first, then the step's text, then as much kernel log as fits. */
function buildRecords(plan: Plan): { records: KvpRecord[]; note: string } {
  const { ids, fields, budget } = plan;
  if (budget < 1) return { records: [], note: 'no room in the pool: nothing written' };
  let left = budget - 1;
  const step = plan.step ? fitText(ids, 'step', plan.step, Math.min(STEP_PARTS, left)) : null;
  left -= step?.records.length ?? 0;
  const kernel = plan.kernelText ? fitText(ids, 'kernel-log', plan.kernelText, left) : null;
  const say = (what: string, fitted: Fitted | null, none: string) =>
    fitted ? `${fitted.records.length}${fitted.cut ? ' cut' : ''}` : none || `not written (${what}: no room)`;
  const kernelNone = plan.kernel === null ? 'off' : 'unreadable' in plan.kernel ? `unreadable ${plan.kernel.unreadable}` : '';
  const outcome: Array<[string, string]> = [['kernel_log', say('kernel log', kernel, kernelNone)]];
  if (plan.step) outcome.push(['step', say('step', step, '')]);
  outcome.push(['written_ms', ms(monotonicMs())]);
  const cut = Boolean(step?.cut || kernel?.cut || (plan.step && !step) || (plan.kernelText && !kernel));
  return {
    records: [timelineRecord(ids, [...fields, ...outcome]), ...(step?.records ?? []), ...(kernel?.records ?? [])],
    note: cut ? `cut to the pool's room (${budget} records)` : '',
  };
}

interface Fitted {
  records: KvpRecord[];
  cut: boolean;
}

/** The text's records within `maxParts`, its oldest lines left out (and said so in its first line) until it fits. */
export function fitText(ids: { vmId: string; run: string }, name: string, text: Buffer, maxParts: number): Fitted | null {
  if (maxParts < 1) return null;
  let body = text;
  for (let attempt = 0; attempt < 24; attempt++) {
    const records = packText(ids, name, body, maxParts);
    if (records) return { records, cut: attempt > 0 };
    const keep = Math.floor((body.length - (body.indexOf(0x0a) + 1)) * 0.7);
    let tail = text.subarray(text.length - keep);
    tail = tail.subarray(tail.indexOf(0x0a) + 1);
    body = Buffer.concat([Buffer.from(`[${text.length - tail.length} earlier bytes left out: the KVP pool had room for ${maxParts} records]\n`), tail]);
  }
  return null;
}
