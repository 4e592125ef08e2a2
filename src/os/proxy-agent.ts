/**
 * Azure's Guest Proxy Agent: on VMs whose provisioning media says `ProvisionGuestProxyAgent`, it guards IMDS and the
 * wireserver, and provisioning goes on only once `azure-proxy-agent --status --wait N` says it is ready (the check
 * cloud-init makes). Missing or not ready: ProvisioningFailed with the platform's reasons.
 */
import { BootstateError } from '../core/errors.js';
import { isCommandMissing, type Runner } from '../system/exec.js';

export const PROXY_AGENT_COMMAND = 'azure-proxy-agent';

/** Runs the status check; resolves once the agent is ready, or throws PROXY_AGENT_NOT_FOUND / _STATUS_FAILURE. */
export async function checkProxyAgent(waitSecs: number, run: Runner, signal: AbortSignal): Promise<{ detail: string }> {
  const argv = [PROXY_AGENT_COMMAND, '--status', '--wait', String(Math.ceil(waitSecs))];
  let result;
  try {
    // Its own wait bounds it; the timeout only catches an agent that ignores --wait.
    result = await run(argv, { signal, timeoutMs: (waitSecs + 5) * 1000, allowFailure: true });
  } catch (error) {
    if (isCommandMissing(error)) throw new BootstateError('PROXY_AGENT_NOT_FOUND', `${PROXY_AGENT_COMMAND} is not installed`, { cause: error });
    throw new BootstateError('PROXY_AGENT_STATUS_FAILURE', `${argv.join(' ')}: ${(error as Error).message}`, {
      data: [['exit_code', ''], ['stdout', ''], ['stderr', (error as Error).message]],
      cause: error,
    });
  }
  if (result.exitCode !== 0) {
    const how = result.exitCode === null ? `killed by ${result.signal}` : `exit code ${result.exitCode}`;
    throw new BootstateError('PROXY_AGENT_STATUS_FAILURE', `${argv.join(' ')} failed (${how})`, {
      data: [['exit_code', String(result.exitCode ?? result.signal ?? '')], ['stdout', result.stdout.trim().slice(0, 512)], ['stderr', result.stderr.trim().slice(0, 512)]],
    });
  }
  return { detail: `${PROXY_AGENT_COMMAND} is ready` };
}
