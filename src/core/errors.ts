/**
 * The one error type of bootstate. Every kind has a stable `code`, a fixed lowercase `reason` (what the
 * fabric shows the VM owner) and the process exit code it maps to. Supporting data is an ordered list of
 * `[key, value]` pairs so the encoded report is deterministic.
 */

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
/** sysexits.h EX_CONFIG: bad configuration or bad input from metadata. */
export const EXIT_CONFIG = 78;

interface Kind {
  reason: string;
  exitCode: number;
}

export const KINDS = {
  CONFIG_INVALID: { reason: 'failed to load config', exitCode: EXIT_CONFIG },
  VM_ID_UNREADABLE: { reason: 'failure to identify Azure VM ID', exitCode: EXIT_FAILURE },
  TIMEOUT: { reason: 'operation timed out', exitCode: EXIT_FAILURE },
  HTTP_STATUS: { reason: 'http status error', exitCode: EXIT_FAILURE },
  HTTP_TRANSPORT: { reason: 'HTTP error', exitCode: EXIT_FAILURE },
  BODY_TOO_LARGE: { reason: 'response body too large', exitCode: EXIT_FAILURE },
  IMDS_FAILED: { reason: 'failed to retrieve instance metadata', exitCode: EXIT_FAILURE },
  IMDS_INVALID: { reason: 'invalid IMDS metadata', exitCode: EXIT_CONFIG },
  IMDS_PARSE: { reason: 'error parsing IMDS metadata', exitCode: EXIT_CONFIG },
  OVF_INVALID: { reason: 'error parsing ovf-env.xml', exitCode: EXIT_CONFIG },
  MEDIA_FAILED: { reason: 'block device error', exitCode: EXIT_FAILURE },
  USERNAME_UNKNOWN: { reason: 'failed to determine username', exitCode: EXIT_FAILURE },
  INVALID_USERNAME: { reason: 'invalid username', exitCode: EXIT_CONFIG },
  INVALID_HOSTNAME: { reason: 'invalid hostname', exitCode: EXIT_CONFIG },
  INVALID_SSH_KEY: { reason: 'invalid ssh public key', exitCode: EXIT_CONFIG },
  PASSWORD_TOO_LONG: { reason: 'unsupported password length', exitCode: EXIT_CONFIG },
  HOSTNAME_FAILED: { reason: 'failed to provision hostname', exitCode: EXIT_FAILURE },
  USER_FAILED: { reason: 'failed to provision user', exitCode: EXIT_FAILURE },
  USER_MISSING: { reason: 'user not found', exitCode: EXIT_FAILURE },
  PASSWORD_FAILED: { reason: 'failed to provision password', exitCode: EXIT_FAILURE },
  SSH_KEYS_FAILED: { reason: 'failed to provision ssh keys', exitCode: EXIT_FAILURE },
  SSHD_CONFIG_FAILED: { reason: 'failed to update sshd config', exitCode: EXIT_FAILURE },
  SUDOERS_FAILED: { reason: 'failed to provision sudoers', exitCode: EXIT_FAILURE },
  HOST_KEYS_FAILED: { reason: 'failed to regenerate ssh host keys', exitCode: EXIT_FAILURE },
  PROXY_AGENT_NOT_FOUND: { reason: 'azure-proxy-agent not found', exitCode: EXIT_FAILURE },
  PROXY_AGENT_STATUS_FAILURE: { reason: 'azure-proxy-agent status failure', exitCode: EXIT_FAILURE },
  MARKER_FAILED: { reason: 'failed to write provisioned marker', exitCode: EXIT_FAILURE },
  MARKER_READ_FAILED: { reason: 'failed to read marker', exitCode: EXIT_FAILURE },
  KVP_FAILED: { reason: 'kvp error', exitCode: EXIT_FAILURE },
  IO: { reason: 'I/O error', exitCode: EXIT_FAILURE },
  SUBPROCESS_FAILED: { reason: 'subprocess failed', exitCode: EXIT_FAILURE },
  TERMINATED: { reason: 'terminated', exitCode: EXIT_FAILURE },
  ALREADY_RUNNING: { reason: 'another instance is running', exitCode: EXIT_FAILURE },
  PPS_UNSUPPORTED: { reason: 'unsupported preprovisioning type', exitCode: EXIT_FAILURE },
  PPS_NOT_SHUT_DOWN: { reason: 'preprovisioned VM started again instead of being shut down', exitCode: EXIT_FAILURE },
  PPS_NIC_FAILED: { reason: 'preprovisioned VM network interface error', exitCode: EXIT_FAILURE },
  MISSING_CUSTOM_DATA: { reason: 'failure to read customData while hasCustomData=true', exitCode: EXIT_FAILURE },
  CUSTOM_DATA_FAILED: { reason: 'failed to save custom data', exitCode: EXIT_FAILURE },
  CERTIFICATES_FAILED: { reason: 'failed to provision certificates', exitCode: EXIT_FAILURE },
  UNHANDLED: { reason: 'unhandled error', exitCode: EXIT_FAILURE },
} as const satisfies Record<string, Kind>;

export type ErrorCode = keyof typeof KINDS;

/** Ordered supporting data: `[key, value]` pairs, encoded in this order. */
export type SupportingData = Array<[string, string]>;

/** The plain-data form of an error, safe to keep in statechart context and to serialise. */
export interface Failure {
  code: ErrorCode;
  reason: string;
  data: SupportingData;
  exitCode: number;
  /** Whether retrying the same operation may succeed (transport errors, retryable statuses, bad bodies). */
  retryable: boolean;
}

export class BootstateError extends Error {
  override readonly name = 'BootstateError';
  readonly code: ErrorCode;
  readonly reason: string;
  readonly data: SupportingData;
  readonly exitCode: number;
  readonly retryable: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options: { data?: SupportingData; retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.reason = KINDS[code].reason;
    this.exitCode = KINDS[code].exitCode;
    this.retryable = options.retryable ?? false;
    this.data = options.data ?? [['error', message]];
  }

  toFailure(): Failure {
    return {
      code: this.code,
      reason: this.reason,
      data: this.data.map(([k, v]) => [k, v]),
      exitCode: this.exitCode,
      retryable: this.retryable,
    };
  }
}

/** Builds a Failure directly (for places that never had an exception). */
export function failure(code: ErrorCode, data: SupportingData, retryable = false): Failure {
  return { code, reason: KINDS[code].reason, data, exitCode: KINDS[code].exitCode, retryable };
}

/**
 * Converts anything thrown into a Failure. A BootstateError keeps its kind; anything else becomes
 * `unhandled error` with its message and a base64 stack whose lines are reversed (innermost first, so the
 * useful end survives truncation — the cloud-init convention).
 */
export function toFailure(error: unknown): Failure {
  if (error instanceof BootstateError) return error.toFailure();
  if (isFailure(error)) return error;
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const stack = error instanceof Error && error.stack ? error.stack : message;
  const reversed = stack.split('\n').reverse().join('\n');
  return failure('UNHANDLED', [
    ['error', message],
    ['stack_base64', Buffer.from(reversed, 'utf8').toString('base64')],
  ]);
}

export function isFailure(value: unknown): value is Failure {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.code === 'string' && v.code in KINDS && typeof v.reason === 'string' && Array.isArray(v.data);
}

/** Escapes a hostile value for inclusion in a message or report: control and non-ASCII characters as \xNN / \u{...}. */
export function escapeValue(value: string, max = 64): string {
  let out = '';
  for (const ch of value) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0x20 && cp < 0x7f && ch !== '\\') out += ch;
    else if (ch === '\\') out += '\\\\';
    else if (cp < 0x100) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else out += `\\u{${cp.toString(16)}}`;
    if (out.length >= max) return `${out.slice(0, max)}…`;
  }
  return out;
}

/** A failure as one readable phrase for a person, e.g. `http status error (endpoint http://…, status 503)`. */
export function describeFailure(failure: Pick<Failure, 'reason' | 'data'>): string {
  const details = failure.data.filter(([key]) => key !== 'stack_base64').map(([key, value]) => `${key.replace(/_/g, ' ')} ${value}`);
  return details.length > 0 ? `${failure.reason} (${details.join(', ')})` : failure.reason;
}
