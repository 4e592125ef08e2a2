/**
 * A head start for one piece of work over others that would compete with it for the CPU: they wait until it has
 * got where it needed to be (`open`), until their own signal aborts, or until `ms` have passed, whichever is first.
 * The bound keeps a head start that never comes (a connection that hangs) from holding up what waits on it.
 *
 * @example
 *   const imds = headStart(50);
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
