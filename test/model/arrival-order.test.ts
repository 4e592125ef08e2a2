/**
 * Which of IMDS and the provisioning media answers first must never decide a run. For every IMDS outcome
 * and every media outcome the run is played twice against the real chart, IMDS first and media first, checked
 * against the oracle after every event (check.ts); then the two orders must have started the same actors, written
 * the same KVP records and ended with the same output. The rest of each run is played straight: every actor in flight
 * finishes, first one first, the clock moves only when nothing else can.
 */
import { describe, expect, it } from 'vitest';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import type { InstanceMetadata, MediaMetadata } from '../../src/core/metadata.js';
import { BootstateError } from '../../src/core/errors.js';
import { playAgainstOracle } from './check.js';
import { ProvisioningOracle } from './oracle.js';
import { apply } from './oracle-paths.js';
import {
  ATTACHED_NIC,
  errorFor,
  MEDIA_CUSTOM_DATA,
  MEDIA_CUSTOMER,
  MEDIA_POOL_OS_DISK,
  MEDIA_POOL_RUNNING,
  MEDIA_PROXY_AGENT,
  MEDIA_WITH_USERNAME,
  MEDIA_WITHOUT_USERNAME,
  METADATA,
  METADATA_CUSTOM_DATA,
  METADATA_PASSWORD_LOGINS,
  METADATA_POOL_OS_DISK,
  METADATA_POOL_RUNNING,
  METADATA_POOL_SAVABLE,
  METADATA_POOL_UNKNOWN,
  TEST_CONFIG,
  type ModelEvent,
  startup,
} from './support.js';

const done = (id: string, output?: unknown): ModelEvent => ({ type: `xstate.done.actor.${id}`, output });
const fail = (id: string, error: unknown): ModelEvent => ({ type: `xstate.error.actor.${id}`, error });
const MEDIA_DEADLINE_MS = TEST_CONFIG.provisioning_media.timeout_secs * 1000;

const IMDS: Record<string, ModelEvent> = {
  'password logins off': done('imds', METADATA),
  'password logins on': done('imds', METADATA_PASSWORD_LOGINS),
  hasCustomData: done('imds', METADATA_CUSTOM_DATA),
  'no extended section': done('imds', { ...METADATA, ppsType: '' } satisfies InstanceMetadata),
  'pool Running': done('imds', METADATA_POOL_RUNNING),
  'pool Savable': done('imds', METADATA_POOL_SAVABLE),
  'pool PreprovisionedOSDisk': done('imds', METADATA_POOL_OS_DISK),
  'pool of an unknown type': done('imds', METADATA_POOL_UNKNOWN),
  'invalid (a wrongly typed key)': fail(
    'imds',
    new BootstateError('IMDS_INVALID', 'compute.osProfile.computerName is not a string', { data: [['key', 'compute.osProfile.computerName']] }),
  ),
  'failed for good': fail('imds', errorFor('imds', false)),
};

const MEDIA: Record<string, ModelEvent> = {
  none: done('media', null),
  'with a user and password': done('media', MEDIA_WITH_USERNAME),
  'without a user': done('media', MEDIA_WITHOUT_USERNAME),
  'with CustomData': done('media', MEDIA_CUSTOM_DATA),
  'asking for the Guest Proxy Agent': done('media', MEDIA_PROXY_AGENT),
  'pool Running (PreprovisionedVMType or the legacy flag)': done('media', MEDIA_POOL_RUNNING),
  'pool Savable': done('media', { ...MEDIA_POOL_RUNNING, ppsType: 'Savable' } satisfies MediaMetadata),
  'pool PreprovisionedOSDisk': done('media', MEDIA_POOL_OS_DISK),
  'malformed ovf-env.xml': fail('media', new BootstateError('OVF_INVALID', 'ovf-env.xml: not well-formed XML')),
  unmountable: fail('media', new BootstateError('MEDIA_FAILED', 'cannot mount /dev/sr0')),
};

/** What a straight run gives each actor: validation returns the plan it was given, the claim the customer's document. */
function straight(oracle: ProvisioningOracle, id: string): ModelEvent {
  if (id === 'validate') {
    const plan = oracle.planToValidate!;
    return done(id, { ...plan, sshKeys: Array.from({ length: plan.sshKeys }, (_, i) => `ssh-ed25519 key${i}`) });
  }
  if (id === 'reprovision') return done(id, MEDIA_CUSTOMER);
  if (id === 'imds') return done(id, METADATA);
  if (id === 'media') return done(id, null);
  if (id === 'nicDetach') return done(id, 'eth0');
  if (id === 'nicAttach') return done(id, ATTACHED_NIC);
  return done(id);
}

const FIRST_BOOT = startup();

/** The events of one run: past the marker, the two answers in the given order, then straight to the end. */
function run(first: ModelEvent, second: ModelEvent) {
  // The IMDS request is written at once: the media read begins beside it.
  const events: ModelEvent[] = [{ type: 'imds.sent' }, first, second];
  const oracle = new ProvisioningOracle(FIRST_BOOT);
  for (const event of events) apply(oracle, event);
  while (!oracle.done) {
    if (events.length > 200) throw new Error(`no end after ${events.length} events`);
    // The carrier and NIC watches beside the polls never end by themselves: a straight run leaves them to the claim.
    const id = oracle.live().find((live) => live !== 'carrier' && live !== 'lease' && live !== 'nicGone');
    // Nothing in flight and no timer due: an OS-disk pool VM waiting for the host's shutdown, which then comes.
    const due = oracle.nextDue;
    const event: ModelEvent = id ? straight(oracle, id) : due !== null ? { type: 'time', to: due } : { type: 'TERMINATE' };
    apply(oracle, event);
    events.push(event);
  }
  return { events, oracle };
}

describe('IMDS and the provisioning media, in either order of arrival', () => {
  for (const [imdsName, imds] of Object.entries(IMDS)) {
    for (const [mediaName, media] of Object.entries(MEDIA)) {
      it(`IMDS ${imdsName}, media ${mediaName}`, async () => {
        const imdsFirst = run(imds, media);
        const mediaFirst = run(media, imds);
        await playAgainstOracle(provisioningMachine, FIRST_BOOT, imdsFirst.events);
        await playAgainstOracle(provisioningMachine, FIRST_BOOT, mediaFirst.events);
        expect(mediaFirst.oracle.output).toEqual(imdsFirst.oracle.output);
        expect([...mediaFirst.oracle.starts].sort()).toEqual([...imdsFirst.oracle.starts].sort());
        expect(mediaFirst.oracle.kvp).toEqual(imdsFirst.oracle.kvp);
      });
    }
    // The media never answers: IMDS before its deadline or after it, the plan is IMDS's alone.
    it(`IMDS ${imdsName}, media wedged past its deadline`, async () => {
      const imdsFirst = run(imds, { type: 'time', to: MEDIA_DEADLINE_MS });
      const deadlineFirst = run({ type: 'time', to: MEDIA_DEADLINE_MS }, imds);
      await playAgainstOracle(provisioningMachine, FIRST_BOOT, imdsFirst.events);
      await playAgainstOracle(provisioningMachine, FIRST_BOOT, deadlineFirst.events);
      expect(deadlineFirst.oracle.output).toEqual(imdsFirst.oracle.output);
      expect(imdsFirst.oracle.output!.warnings).toContain(
        `provisioning media: not read within ${TEST_CONFIG.provisioning_media.timeout_secs} s; provisioning goes on without it`,
      );
    });
  }

  it('the cases the adversarial pass found end as docs/architecture.md says', () => {
    const outcome = (imds: string, media: string) => run(IMDS[imds]!, MEDIA[media]!).oracle;
    // A pool VM flagged only by the media waits for its claim and provisions the customer.
    const pool = outcome('password logins off', 'pool Running (PreprovisionedVMType or the legacy flag)');
    expect(pool.output).toMatchObject({ result: 'provisioned', exitCode: 0 });
    expect(pool.starts.some((s) => s.startsWith('reprovision'))).toBe(true);
    expect(pool.starts.filter((s) => s.startsWith('user ')).map((s) => s.split(' ')[1])).toEqual(['imds:azureuser@vm-imds']);
    // A media-only Savable waits for its NIC's detach and attach, then is claimed; an OS disk waits for its shutdown.
    const savable = outcome('no extended section', 'pool Savable');
    expect(savable.output).toMatchObject({ result: 'provisioned', exitCode: 0 });
    expect(savable.starts.filter((s) => /^(nicDetach|nicAttach|primaryNic|reprovision)/.test(s)).map((s) => s.split(' ')[0])).toEqual(['nicDetach', 'nicAttach', 'primaryNic', 'reprovision']);
    expect(outcome('pool Running', 'pool PreprovisionedOSDisk').output).toMatchObject({ result: 'pool-shutdown', exitCode: 0, reported: true });
    // An unknown type from either source is refused naming it, whatever the other says.
    expect(outcome('pool of an unknown type', 'pool Savable').output).toMatchObject({ result: 'failed', code: 'PPS_UNSUPPORTED' });
    // Media CustomData reaches the plan without hasCustomData.
    expect(outcome('password logins off', 'with CustomData').starts.find((s) => s.startsWith('validate'))).toContain('custom-data=false/true');
  });
});
