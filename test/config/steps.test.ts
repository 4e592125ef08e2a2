import { describe, expect, it } from 'vitest';
import { selectSteps } from '../../src/config/steps.js';

describe('--only and --skip', () => {
  it('--only keeps the named steps and says why each other one is skipped', () => {
    const selection = selectSteps(['hostname,user'], undefined);
    expect(selection.skip).toEqual(['password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data', 'resource-disk']);
    expect(selection.why.sshd).toBe('--only hostname,user');
    expect(selection.why.hostname).toBeUndefined();
  });

  it('--skip leaves out the named steps; both flags repeat and combine', () => {
    expect(selectSteps(undefined, ['sshd', 'password']).skip).toEqual(['password', 'sshd']);
    const both = selectSteps(['hostname', 'user,sshd'], ['sshd']);
    expect(both.skip).toEqual(['password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data', 'resource-disk']);
    expect(both.why.sshd).toBe('--skip sshd');
    expect(selectSteps(undefined, undefined).skip).toEqual([]);
  });

  it('refuses an unknown step as a usage error naming the valid ones', () => {
    expect(() => selectSteps(['hostnme'], undefined)).toThrow(/--only: unknown step "hostnme"; steps are hostname, user, password, ssh-keys, sshd, host-keys, custom-data, resource-disk/);
    expect(() => selectSteps(undefined, ['x'])).toThrow(TypeError);
  });
});
