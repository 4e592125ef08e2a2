/**
 * What the outside world sees of a provisioning run, as the oracle (oracle.ts) states it and the checks (check.ts)
 * read it off a run: failures, plans, outputs, pool types. Written from the protocol, not from the chart.
 */
import type { InstanceMetadata, MediaMetadata } from '../../src/core/metadata.js';
import { toFailure, type ErrorCode } from '../../src/core/errors.js';

/** A failure as the fabric and the log show it: its code, and the phase / last error it carries. */
export interface SeenFailure {
  code: ErrorCode;
  phase?: string;
  lastError?: string;
  /** The pool type a refused pool VM named, and the IMDS key found invalid. */
  ppsType?: string;
  key?: string;
}

export interface SeenOutput {
  /** The last state the journal records. */
  state: 'provisioned' | 'alreadyProvisioned' | 'alreadyRunning' | 'notOnAzure' | 'waitingInterrupted' | 'shutDownInPool' | 'readyNotAccepted' | 'markerNotWritten' | 'failed' | 'failedUnreported';
  result: 'provisioned' | 'already-provisioned' | 'waiting-for-reuse' | 'pool-shutdown' | 'not-on-azure' | 'failed';
  exitCode: number;
  code?: ErrorCode;
  reported: boolean;
  /** `last_error` of the failure the log line details. */
  lastError?: string;
  /** What the run logs as warnings at its end. */
  warnings: string[];
}

export interface SeenPlan {
  source: 'imds' | 'media';
  username: string;
  hostname: string;
  sshKeys: number;
  passwordAuthentication: boolean;
  passwordProvided: boolean;
}

export const describeFailure = (f: SeenFailure | null | undefined): string =>
  f
    ? [f.code, f.phase && `phase=${f.phase}`, f.lastError && `last_error=${f.lastError}`, f.ppsType && `pps_type=${f.ppsType}`, f.key && `key=${f.key}`]
        .filter(Boolean)
        .join(' ')
    : 'none';

/** A pool type as spelled by IMDS or the media, in canonical spelling: empty is None, anything unrecognised Unknown. */
export function canonicalPpsType(raw: string | null | undefined): string {
  const text = (raw ?? '').trim();
  if (!text) return 'None';
  return ['None', 'Running', 'Savable', 'PreprovisionedOSDisk'].find((t) => t.toLowerCase() === text.toLowerCase()) ?? 'Unknown';
}

/** A type this agent cannot serve wins over Running, from either source (docs/preprovisioned.md). */
export function poolOf(imds: string | null | undefined, media: string | null | undefined): { type: string; raw: string } {
  const both = [imds, media].map((raw) => ({ type: canonicalPpsType(raw), raw: (raw ?? '').trim() }));
  return both.find((p) => p.type !== 'None' && p.type !== 'Running') ?? both.find((p) => p.type === 'Running') ?? { type: 'None', raw: 'None' };
}

export const describePlan = (p: SeenPlan | null | undefined): string =>
  p
    ? `${p.source}:${p.username}@${p.hostname} keys=${p.sshKeys} password-auth=${p.passwordAuthentication} password=${p.passwordProvided}`
    : 'no plan';

export const reasonOf = (error: unknown) => toFailure(error).reason;
export const seen = (error: unknown): SeenFailure => {
  const f = toFailure(error);
  const lastError = f.data.find(([k]) => k === 'last_error')?.[1];
  const phase = f.data.find(([k]) => k === 'phase')?.[1];
  const ppsType = f.data.find(([k]) => k === 'pps_type')?.[1];
  const key = f.data.find(([k]) => k === 'key')?.[1];
  return { code: f.code, ...(phase ? { phase } : {}), ...(lastError ? { lastError } : {}), ...(ppsType ? { ppsType } : {}), ...(key ? { key } : {}) };
};

/** A failed poll's kind as the next poll is told it: the code, and the HTTP status when there is one. */
export const pollKind = (error: unknown) => {
  const f = toFailure(error);
  const status = f.data.find(([k]) => k === 'status')?.[1];
  return status ? `${f.code}:${status}` : f.code;
};

/**
 * The plan the agent must apply: IMDS first, else the media when it names a user. A password comes only from the
 * media; without an explicit setting, the media allows password login exactly when it carries one.
 */
export function expectedPlan(metadata: InstanceMetadata | null, media: MediaMetadata | null): SeenPlan | null {
  const passwordProvided = media?.passwordProvided ?? false;
  if (metadata) {
    return {
      source: 'imds',
      username: metadata.adminUsername,
      hostname: metadata.computerName,
      sshKeys: metadata.publicKeys.length,
      passwordAuthentication: !metadata.disablePasswordAuthentication,
      passwordProvided,
    };
  }
  if (media?.username) {
    const passwordAuthentication = media.disablePasswordAuthentication === null ? passwordProvided : !media.disablePasswordAuthentication;
    return { source: 'media', username: media.username, hostname: media.hostname ?? '', sshKeys: media.publicKeys.length, passwordAuthentication, passwordProvided };
  }
  return null;
}
