/**
 * The placeholder of an actor a chart invokes: charts perform no I/O, so each names its actors and the run provides
 * them for real (`machine.provide`, or the chart's own factory). One that was not provided fails with its name.
 */
import { fromPromise, type NonReducibleUnknown } from 'xstate';

/** A named promise actor that throws until it is provided. */
export const placeholder = <Out, In = NonReducibleUnknown>(name: string) =>
  fromPromise<Out, In>(async () => {
    throw new Error(`actor ${name} was not provided`);
  });
