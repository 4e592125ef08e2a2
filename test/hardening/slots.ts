/**
 * Runs work at most `slots` at a time. A finishing run hands its slot straight to the next waiter, so no more than
 * `slots` ever run: the fault matrices use it so that the agents they start measure faults, not CPU starvation.
 */
export function limitConcurrency(slots: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (running >= slots) await new Promise<void>((resolve) => waiting.push(resolve));
    else running += 1;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running -= 1;
    }
  };
}
