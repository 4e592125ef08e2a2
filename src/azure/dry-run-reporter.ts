/**
 * The health reporter of a dry run: tells the fabric nothing. Each report it would have posted is noted (health
 * and endpoint) and counts as accepted, so the run goes on exactly as a real one whose reports were accepted.
 */
import { HealthReporter, type HealthPostResult, type PostHealthOptions } from './wireserver.js';

export class DryRunReporter extends HealthReporter {
  constructor(private readonly note: (line: string) => void) {
    super();
  }

  override async post(options: PostHealthOptions): Promise<HealthPostResult> {
    this.note(`would report ${options.health} to ${options.config.health_endpoint} (not sent: dry run)`);
    return { sent: false, status: null };
  }
}
