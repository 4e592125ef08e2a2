/**
 * The validation step as the chart runs it (the real `validatePlan` and `readMedia` actors): SSH keys are selected
 * by the key policy, and provisioning media that could not be used fails the run only when it mattered.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { createActor, toPromise } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { ProvisioningPlan } from '../../machines/provisioning.js';
import { provisioningActors, type ProvisioningDeps } from '../../src/provision/actors.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { BootstateError, failure, type Failure } from '../../src/core/errors.js';
import { SecretStore } from '../../src/core/secrets.js';
import { keyLine } from '../os/keys.js';

function harness(readMedia: ProvisioningDeps['readMedia'] = async () => null) {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } });
  const deps = {
    log: pino({ level: 'debug' }, sink),
    provisioner: { name: 'test' },
    readMedia,
    secrets: new SecretStore(),
  } as unknown as ProvisioningDeps;
  return { actors: provisioningActors(deps), lines };
}

const plan = (changes: Partial<ProvisioningPlan> = {}): ProvisioningPlan => ({
  source: 'imds', username: 'azureuser', hostname: 'web-01', groups: [], sshKeys: [keyLine()], passwordAuthentication: false, passwordProvided: false,
  hasCustomData: false, customDataFound: false, ...changes,
});

async function validate(input: { plan: ProvisioningPlan; mediaFailure: Failure | null }): Promise<{ output?: ProvisioningPlan; error?: BootstateError; lines: Array<Record<string, unknown>> }> {
  const { actors, lines } = harness();
  const actor = createActor(actors.validatePlan, { input: { config: DEFAULT_CONFIG, ...input } });
  actor.start();
  const outcome = await toPromise(actor).then((output) => ({ output }), (error: unknown) => ({ error: error as BootstateError }));
  return { ...outcome, lines };
}

const TOO_LONG = failure('PASSWORD_TOO_LONG', [['length', '73'], ['max_length', '72']]);
const MALFORMED = failure('OVF_INVALID', [['problem', 'not well-formed XML']]);

describe('validatePlan', () => {
  it('keeps the valid key and logs a warning naming the invalid one', async () => {
    const good = keyLine();
    const { output, lines } = await validate({ plan: plan({ sshKeys: [good, 'ssh-rsa AAAA!'] }), mediaFailure: null });
    expect(output?.sshKeys).toEqual([good]);
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, key: 'ssh-rsa AAAA!', msg: expect.stringContaining('ssh key skipped') }));
  });

  it('fails with PASSWORD_TOO_LONG (exit 78) when the media carried a password over 72 characters, even with IMDS keys', async () => {
    const { error } = await validate({ plan: plan(), mediaFailure: TOO_LONG });
    expect([error?.code, error?.exitCode]).toEqual(['PASSWORD_TOO_LONG', 78]);
    expect(error?.data).toEqual(TOO_LONG.data);
  });

  it('goes on with IMDS when ovf-env.xml is malformed but a key gets the owner in', async () => {
    const { output } = await validate({ plan: plan({ passwordAuthentication: true }), mediaFailure: MALFORMED });
    expect(output?.sshKeys).toHaveLength(1);
  });

  it('fails with OVF_INVALID when ovf-env.xml is malformed, password logins are on and no key is usable', async () => {
    const { error } = await validate({ plan: plan({ passwordAuthentication: true, sshKeys: [] }), mediaFailure: MALFORMED });
    expect([error?.code, error?.exitCode]).toEqual(['OVF_INVALID', 78]);
  });
});

describe('readMedia', () => {
  it('logs why the media is unusable at warn level before the chart sets it aside', async () => {
    const { actors, lines } = harness(async () => {
      throw new BootstateError('PASSWORD_TOO_LONG', 'password is longer than 72 characters');
    });
    const actor = createActor(actors.readMedia, { input: { config: DEFAULT_CONFIG, claimed: false } });
    actor.start();
    await expect(toPromise(actor)).rejects.toMatchObject({ code: 'PASSWORD_TOO_LONG' });
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, step: 'media', code: 'PASSWORD_TOO_LONG', msg: expect.stringContaining('provisioning media unusable') }));
  });
});
