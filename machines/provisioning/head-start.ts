/**
 * The IMDS head start, in one place. The IMDS request is the one Ready waits on; work that would compete with it for
 * the CPU waits until it has been written to its socket, or its attempt has ended, or `IMDS_HEAD_START_MS` have
 * passed (a connection that hangs must not hold anything up), whichever is first:
 *
 * - before the chart: `src/provision/provision.ts` sends the first request, and loads the rest of the agent once
 *   `headStart(IMDS_HEAD_START_MS)` opens (`src/provision/first-imds-request.ts`);
 * - in the chart: the media read and the host keys start in `waitingForImds`; the IMDS actor says its request was
 *   written (`imds.sent`) through the `written` callback in its input, or `imdsHeadStart` ends the wait;
 * - the test oracle (test/model/oracle.ts) holds the same bound.
 *
 * This file imports nothing at run time: the run's first half (the provision script) holds it without XState.
 *
 * The in-progress report does not wait: a run that fails as soon as IMDS answers would otherwise leave before the
 * fabric heard that provisioning started.
 */
import type { AnyActorRef } from 'xstate';

/** How long anything waits at most for the IMDS request to be written. */
export const IMDS_HEAD_START_MS = 50;

/** The event the chart hears once the IMDS request was written (or its attempt ended). */
export const IMDS_SENT = { type: 'imds.sent' } as const;
export type ImdsSentEvent = typeof IMDS_SENT;

/** The media read's wait; once it has left it, the host keys may start too (guard `imdsHeadStartOver`, guards.ts). */
export const MEDIA_WAITING_FOR_IMDS = '#provisioning.provisioning.work.gathering.media.waitingForImds';

/** The media region's first state: it reads once the request has left, or the head start is over. */
export const mediaWaitsForImds = { on: { [IMDS_SENT.type]: 'reading' }, after: { imdsHeadStart: 'reading' } } as const;

/** The host key region's first state: ssh-keygen's fork and CPU wait for the media read's start. */
export const hostKeysWaitForImds = {
  always: [
    { guard: { type: 'stepSkipped', params: { step: 'host-keys' } }, target: 'done' },
    { guard: 'imdsHeadStartOver', target: 'replacing' },
  ],
} as const;

/** The callback the IMDS actor gets in its input (`written`): it tells the chart `self` that its request has left. */
export const tellWritten = (self: AnyActorRef) => () => self.send(IMDS_SENT);

/**
 * The head start as a promise, for the run before the chart: waiters go once `open` is called, their own signal
 * aborts, or `ms` have passed, whichever is first.
 *
 * @example
 *   const imds = headStart(IMDS_HEAD_START_MS);
 *   fetch({ onSent: imds.open }).finally(imds.open);
 *   await imds.wait(signal); // then read the media
 */
export function headStart(ms: number): { open(): void; wait(signal: AbortSignal): Promise<void> } {
  let open!: () => void;
  // The executor runs at once, so `open` is set before it is handed out.
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    open,
    wait: (signal) =>
      new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        if (signal.aborted) done();
        else signal.addEventListener('abort', done, { once: true });
        void opened.then(done);
      }),
  };
}
