/**
 * What `bootstate monitor --once` measured and posted, as a few readable lines, and whether anything failed: a
 * check whose measurement failed, or a HealthService POST without a 2xx answer.
 */
import type { Observation, PostOutcome } from '../azure/healthservice.js';
import type { Measurement } from '../../machines/monitor.js';
import { escapeValue } from '../core/errors.js';
import type { Attributes } from '../observe/run-trace.js';

export class MonitorSummary {
  readonly #checks = new Map<string, Measurement>();
  readonly #posts: Array<{ names: string[]; healthy: boolean[]; outcome: PostOutcome }> = [];

  measured(name: string, measurement: Measurement): void {
    this.#checks.set(name, measurement);
  }

  posted(batch: readonly Observation[], outcome: PostOutcome): void {
    this.#posts.push({ names: batch.map((o) => o.ObservationName), healthy: batch.map((o) => o.IsHealthy), outcome });
  }

  get failedChecks(): number {
    return [...this.#checks.values()].filter((m) => !m.ok).length;
  }

  get failedPosts(): number {
    return this.#posts.filter((p) => !p.outcome.ok).length;
  }

  get failed(): boolean {
    return this.failedChecks > 0 || this.failedPosts > 0;
  }

  /** e.g. `  GuestAgentPluginHeartbeat  ok      200 OK   posted healthy (HTTP 200)`. */
  lines(healthServiceUrl: string): string[] {
    const width = Math.max(0, ...[...this.#checks.keys()].map((name) => name.length));
    const out = [`checks (each measured once) and observations posted to ${healthServiceUrl}:`];
    for (const [name, m] of this.#checks) {
      const post = this.#posts.find((p) => p.names.includes(name));
      const healthy = post?.healthy[post.names.indexOf(name)];
      const posted = !post
        ? 'not posted'
        : post.outcome.ok
          ? `posted ${healthy ? 'healthy' : 'unhealthy'} (HTTP ${post.outcome.status})`
          : `post failed: ${post.outcome.status ? `HTTP ${post.outcome.status}` : post.outcome.error}`;
      out.push(`  ${name.padEnd(width)}  ${m.ok ? 'ok    ' : 'FAILED'}  ${m.value || '-'}  ${posted}`);
    }
    out.push(`${this.failedChecks} check(s) failed, ${this.failedPosts} post(s) failed`);
    return out;
  }

  /**
   * The cycle's observations as its trace's attributes: per check whether it was ok, what it measured, and whether it
   * was posted healthy; the counts of failed checks and posts.
   */
  traceAttributes(): Attributes {
    const out: Attributes = { 'bootstate.monitor.checks_failed': this.failedChecks, 'bootstate.monitor.posts_failed': this.failedPosts };
    for (const [name, m] of this.#checks) {
      const key = `bootstate.monitor.${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
      out[`${key}.ok`] = m.ok;
      if (m.value) out[`${key}.value`] = escapeValue(m.value, 128);
      const post = this.#posts.find((p) => p.names.includes(name));
      if (post?.outcome.ok) out[`${key}.healthy`] = post.healthy[post.names.indexOf(name)]!;
      if (post?.outcome.status !== undefined) out[`${key}.http_status`] = post.outcome.status;
    }
    return out;
  }
}
