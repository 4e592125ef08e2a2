/**
 * Pre-provisioned VMs (PPS: IMDS `extended.compute.ppsType`, the media's `PreprovisionedVm`/`PreprovisionedVMType`;
 * docs/protocol.md#pre-provisioning-type):
 * which pool type a VM is in, and when a wait for reuse logs a failed poll. Pure functions; the chart decides.
 */
import type { Failure } from '../core/errors.js';

/** The types `pps_type` may carry in a report (libazureinit-kvp's set). */
export type PpsType = 'None' | 'Running' | 'Savable' | 'PreprovisionedOSDisk' | 'Unknown';

const KNOWN: Record<string, PpsType> = {
  none: 'None',
  running: 'Running',
  savable: 'Savable',
  preprovisionedosdisk: 'PreprovisionedOSDisk',
};

/** A type as IMDS or the media spelled it, in its canonical spelling; anything unrecognised is `Unknown`. */
export function normalizePpsType(raw: string | null | undefined): PpsType {
  const text = (raw ?? '').trim();
  if (text === '') return 'None';
  return KNOWN[text.toLowerCase()] ?? 'Unknown';
}

export interface PoolType {
  type: PpsType;
  /** The value as delivered (for the failure report when the type is not served). */
  raw: string;
  source: 'imds' | 'media' | 'none';
}

/**
 * The pool type a first boot must honour. As cloud-init does, a type this agent cannot serve wins over Running when
 * IMDS and the media disagree, so the placeholder identity is never provisioned by mistake.
 *
 * @example
 *   poolType('Running', 'None') // { type: 'Running', raw: 'Running', source: 'imds' }
 */
export function poolType(imds: string | null | undefined, media: string | null | undefined): PoolType {
  const candidates: PoolType[] = [
    { type: normalizePpsType(imds), raw: (imds ?? '').trim(), source: 'imds' },
    { type: normalizePpsType(media), raw: (media ?? '').trim(), source: 'media' },
  ];
  const unsupported = candidates.find((c) => c.type !== 'None' && c.type !== 'Running');
  if (unsupported) return unsupported;
  const running = candidates.find((c) => c.type === 'Running');
  if (running) return running;
  return { type: 'None', raw: 'None', source: 'none' };
}

/** A failed poll's kind: its error code and, for an HTTP status, the status. Two polls with the same kind repeat. */
export function pollErrorKind(failure: Failure): string {
  const status = failure.data.find(([key]) => key === 'status')?.[1];
  return status ? `${failure.code}:${status}` : failure.code;
}

/**
 * Whether a failed poll is logged (docs/protocol.md#reprovisiondata): attempts 1, 2, 4, 8, … and any attempt whose error kind differs from
 * the previous attempt's, so a wait of days leaves a few dozen lines, yet every change is seen.
 */
export function shouldLogPoll(attempt: number, kind: string, previousKind: string | null): boolean {
  if (kind !== previousKind) return true;
  return attempt > 0 && (attempt & (attempt - 1)) === 0;
}
