/**
 * A Savable pool VM's Ready (src/provision/actors.ts, `reportHealth` with `answerMayBeLost`): the host unplugs the NIC
 * or saves the VM once it has the report, so a transport error after the request was written is the expected end.
 * Before it was written, or for any other report, a transport error is still a failure to retry.
 */
import pino from 'pino';
import { createActor, toPromise } from 'xstate';
import { describe, expect, it } from 'vitest';
import { HEALTH_READY } from '../../machines/provisioning.js';
import { provisioningActors, type ProvisioningDeps } from '../../src/provision/actors.js';
import type { PostHealthOptions } from '../../src/azure/wireserver.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { BootstateError } from '../../src/core/errors.js';

const lost = () => new BootstateError('HTTP_TRANSPORT', 'socket hang up', { data: [['error', 'socket hang up']], retryable: true });

/** The reportHealth actor over a reporter that writes the request (or not) and then loses the connection. */
function report(written: boolean, answerMayBeLost: boolean) {
  const reporter = {
    post: async (options: PostHealthOptions) => {
      if (written) options.onSent?.();
      throw lost();
    },
  };
  const deps = { log: pino({ level: 'silent' }), reporter, reports: {}, kvp: null } as unknown as ProvisioningDeps;
  const input = { config: DEFAULT_CONFIG, vmId: 'vm', health: HEALTH_READY as typeof HEALTH_READY, failure: null, ppsType: 'Savable', ...(answerMayBeLost ? { answerMayBeLost } : {}) };
  return toPromise(createActor(provisioningActors(deps).reportHealth, { input }).start());
}

describe("a Savable pool VM's Ready", () => {
  it('counts as sent when the connection is lost after the request was written', async () => {
    await expect(report(true, true)).resolves.toBeUndefined();
  });

  it('is retried when the connection was lost before the request was written', async () => {
    await expect(report(false, true)).rejects.toMatchObject({ code: 'HTTP_TRANSPORT', retryable: true });
  });

  it('any other report losing its answer fails as usual', async () => {
    await expect(report(true, false)).rejects.toMatchObject({ code: 'HTTP_TRANSPORT' });
  });
});
