/**
 * The run's journal as an observer. The journal is named after the VM id, which is known only once the run has read
 * it: the chart's events before that are held (at most 1,000, each with when it happened) and written when the
 * journal opens. A journal that cannot be opened, or that throws, turns the `journal` sink off; the run goes on.
 */
import type { InspectionEvent } from 'xstate';
import { createJournal, type Journal } from '../inspect/journal.js';
import type { Sinks } from '../logging/sinks.js';

/** Held events at most, before the journal opens. */
const EARLY_EVENTS = 1000;

export interface JournalSettings {
  /** `[journal] enable`. */
  enable: boolean;
  /** The data directory: journals go to its `runs/`. */
  dir: string;
  /** `[journal] keep`: how many journals rotation leaves. */
  keep: number;
}

export class JournalObserver {
  #journal: Journal | null = null;
  readonly #early: Array<[InspectionEvent, Date]> = [];
  /** The observer: writes the event, or holds it until the journal opens. */
  readonly inspect: (event: InspectionEvent, at?: Date) => void;

  constructor(private readonly sinks: Sinks, private readonly settings: JournalSettings) {
    this.inspect = sinks.observer('journal', (event: InspectionEvent, at?: Date) => {
      if (this.#journal) this.#journal.inspect(event, at);
      else if (settings.enable && this.#early.length < EARLY_EVENTS) this.#early.push([event, at ?? new Date()]);
    });
  }

  /** Opens the journal of `vmId` (once) and writes the events held so far. */
  open(vmId: string): void {
    if (!this.settings.enable || this.#journal || !this.sinks.isOn('journal')) return;
    try {
      this.#journal = createJournal({ dir: this.settings.dir, vmId, keep: this.settings.keep });
    } catch (error) {
      this.sinks.fail('journal', error);
      this.#early.length = 0;
      return;
    }
    for (const [event, at] of this.#early.splice(0)) this.inspect(event, at);
  }

  /** Where the journal is, or null: never opened, or turned off. */
  get path(): string | null {
    return this.sinks.isOn('journal') ? (this.#journal?.path ?? null) : null;
  }

  close(): void {
    this.sinks.observer('journal', () => this.#journal?.close())();
  }
}
