/**
 * The gates of a model run (harness.ts) by what each step is, not by the id the chart invokes it under: the table of
 * step names is test/support/chart.ts's `STEP`, so a renamed invoke id is one edit there. The named helpers are the
 * moves the model tests make most: read the media, answer IMDS, gather both, accept the plan, configure the OS.
 */
import { STEP, type Step } from '../support/chart.js';
import type { Gate, Run } from './harness.js';
import { METADATA } from './support.js';

/** Finishes the running `step` with `value`. */
export const complete = (run: Run, step: Step, value?: unknown) => run.resolve(STEP[step], value);

/** Fails the running `step` with `error`. */
export const fail = (run: Run, step: Step, error: unknown) => run.reject(STEP[step], error);

/** The start of `step` that is running now (throws when none is). */
export const running = (run: Run, step: Step): Gate => run.pending(STEP[step]);

/** The most recent start of `step`, running or not. */
export const lastStart = (run: Run, step: Step): Gate | undefined => run.latest(STEP[step]);

/** Every start of any of `steps`, in the order they started. */
export const startsOf = (run: Run, ...steps: Step[]): Gate[] => {
  const ids: string[] = steps.map((step) => STEP[step]);
  return run.gates.filter((gate) => ids.includes(gate.id));
};

/** Whether any of `steps` has started. */
export const hasStarted = (run: Run, ...steps: Step[]) => startsOf(run, ...steps).length > 0;

/** Finishes each of `steps` in turn, with no value. */
export async function completeEach(run: Run, steps: readonly Step[]) {
  for (const step of steps) await complete(run, step);
}

/** The media reader finds `media` (null: no provisioning media). */
export const readMedia = (run: Run, media: unknown = null) => complete(run, 'media', media);
export const failMedia = (run: Run, error: unknown) => fail(run, 'media', error);

/** IMDS answers with `metadata`. */
export const answerImds = (run: Run, metadata: unknown = METADATA) => complete(run, 'imds', metadata);
export const failImds = (run: Run, error: unknown) => fail(run, 'imds', error);

/** The common start of a first boot: the media is read (none by default), then IMDS answers (METADATA by default). */
export async function gather(run: Run, { media = null, imds = METADATA }: { media?: unknown; imds?: unknown } = {}) {
  await readMedia(run, media);
  await answerImds(run, imds);
}

/** The running validation accepts the plan it was given. */
export const acceptPlan = (run: Run) => complete(run, 'validate', running(run, 'validate').input.plan);

/** Completes validation and every OS step with the plan each was given. */
export async function throughOs(run: Run) {
  await acceptPlan(run);
  for (const step of ['hostname', 'user', 'password', 'sshKeys', 'hostKeys', 'sshd', 'customData'] as const) {
    // The host keys are made from the start of the work: a path may have finished them already.
    if (step === 'hostKeys' && lastStart(run, step)?.settled) continue;
    await complete(run, step);
  }
}

/**
 * The end of a first boot once the OS is configured: the report-pending marker, the hostname's publication (started
 * with READY unless the hostname step was left out), Ready accepted, the provisioned marker.
 */
export async function reportReady(run: Run) {
  await complete(run, 'pendingMarker');
  await publishIfRunning(run);
  await completeEach(run, ['readyReport', 'provisionedMarker']);
}

/** Completes the hostname's publication when it runs (it starts with READY=1; Ready waits for it). */
export async function publishIfRunning(run: Run) {
  const publish = lastStart(run, 'hostnamePublish');
  if (publish && !publish.settled) await complete(run, 'hostnamePublish');
}
