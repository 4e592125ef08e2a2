/**
 * Encodes each run's final report once, so the KVP record and the wireserver description carry the same
 * bytes (same timestamp) however many HTTP attempts follow.
 */
import { encodeFailureReport, encodeSuccessReport } from '../azure/report.js';
import type { Failure } from '../core/errors.js';

/** The encoded reports of one run, by VM id, pps_type (and failure): each made once, then the same bytes every time. */
export class EncodedReports {
  #success = new Map<string, string>();
  #failure = new Map<string, string>();

  /** `scrub` cleans a failure's supporting data before it is encoded (the run's secrets out of a command's stderr). */
  constructor(private readonly scrub: (data: Failure['data']) => Failure['data'] = (data) => data) {}

  /** The encoded success report for `vmId`, created on first use. */
  success(vmId: string, ppsType = 'None'): string {
    const key = `${vmId}\u0000${ppsType}`;
    let encoded = this.#success.get(key);
    if (encoded === undefined) {
      encoded = encodeSuccessReport({ vmId, ppsType });
      this.#success.set(key, encoded);
    }
    return encoded;
  }

  /** The encoded failure report for this failure and `vmId`, created on first use. */
  failure(failure: Failure, vmId: string, ppsType = 'None'): string {
    const key = `${vmId}\u0000${ppsType}\u0000${failure.code}\u0000${JSON.stringify(failure.data)}`;
    let encoded = this.#failure.get(key);
    if (encoded === undefined) {
      encoded = encodeFailureReport({ ...failure, data: this.scrub(failure.data) }, { vmId, ppsType });
      this.#failure.set(key, encoded);
    }
    return encoded;
  }
}
