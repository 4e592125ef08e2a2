/**
 * Which agent sent a request, and the health reports of every agent in one list: bootstate's JSON reports to
 * `/provisioning/health` and the classic agents' XML reports to `/machine?comp=health` side by side, so a test of
 * an image that carries WALinuxAgent or cloud-init beside bootstate can tell who told the fabric what, in order.
 */
import type { AgentName, RecordedRequest } from './behaviours.js';
import { parseWireHealthReport } from './goal-state.js';

export type { AgentName } from './behaviours.js';

/**
 * Names the agent from its User-Agent header: `bootstate/<version>` (and its `+health` variant),
 * `WALinuxAgent/<version>`, `Cloud-Init/<version>`.
 */
export function agentOf(userAgent: string | undefined): AgentName {
  const product = (userAgent ?? '').trim().split('/')[0]!.toLowerCase();
  if (product === 'bootstate') return 'bootstate';
  if (product === 'walinuxagent') return 'WALinuxAgent';
  if (product === 'cloud-init') return 'cloud-init';
  return 'unknown';
}

/** One health report as the fabric heard it, whichever protocol carried it. */
export interface HealthReport {
  agent: AgentName;
  /** `json`: `POST /provisioning/health`; `xml`: `POST /machine?comp=health`. */
  protocol: 'json' | 'xml';
  state: string;
  subStatus?: string;
  receivedAt: number;
}

/**
 * The health reports among `requests`, in arrival order. A body that does not decode is left out: the fabric
 * answered it 400, so the agent that sent it told the fabric nothing.
 */
export function healthReportsOf(requests: RecordedRequest[]): HealthReport[] {
  const reports: HealthReport[] = [];
  for (const request of requests) {
    const decoded = decodeHealth(request);
    if (decoded) reports.push({ agent: agentOf(request.userAgent), receivedAt: request.receivedAt, ...decoded });
  }
  return reports;
}

/** `agent:state` or `agent:state/subStatus` of each report, e.g. `bootstate:Ready`, `WALinuxAgent:Ready`. */
export function healthKindsOf(requests: RecordedRequest[]): string[] {
  return healthReportsOf(requests).map((r) => `${r.agent}:${r.state}${r.subStatus ? `/${r.subStatus}` : ''}`);
}

/** A report is final when it is Ready or says provisioning failed; in-progress reports are not. */
export function isFinal(report: Pick<HealthReport, 'state' | 'subStatus'>): boolean {
  return report.state === 'Ready' || report.subStatus === 'ProvisioningFailed';
}

function decodeHealth(request: RecordedRequest): Pick<HealthReport, 'protocol' | 'state' | 'subStatus'> | null {
  try {
    if (request.route === 'health') {
      const body = JSON.parse(request.body) as { state?: unknown; details?: { subStatus?: unknown } };
      if (typeof body.state !== 'string') return null;
      const subStatus = typeof body.details?.subStatus === 'string' ? body.details.subStatus : undefined;
      return { protocol: 'json', state: body.state, ...(subStatus ? { subStatus } : {}) };
    }
    if (request.route === 'wireHealth') {
      const { state, subStatus } = parseWireHealthReport(request.body);
      return { protocol: 'xml', state, ...(subStatus ? { subStatus } : {}) };
    }
  } catch {
    return null;
  }
  return null;
}
