import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { tryBackends, type Backend, type OsContext } from '../../src/os/backends.js';

const context: OsContext = { root: '/', run: async () => Promise.reject(new Error('unused')), rootOwner: { uid: 0, gid: 0 } };
const signal = new AbortController().signal;
const failing = (message: string): Backend<string> => async () => {
  throw new BootstateError('SUBPROCESS_FAILED', message, { data: [['command', message], ['exit_status', '1']] });
};

describe('tryBackends', () => {
  it('uses the first backend that succeeds and reports the earlier failures as warnings', async () => {
    const table = { a: failing('a: no bus'), b: async (name: string) => ({ backend: 'b', detail: name }) };
    const result = await tryBackends('hostname', 'HOSTNAME_FAILED', ['a', 'b'], table, 'web', context, signal);
    expect(result).toEqual({ backend: 'b', detail: 'web', warnings: ['hostname: backend a failed: a: no bus'] });
  });

  it('names the step and the last backend when every backend fails', async () => {
    const table = { a: failing('a broke'), b: failing('b broke') };
    const error = (await tryBackends('user', 'USER_FAILED', ['a', 'nope', 'b'], table, 'x', context, signal).catch((e: unknown) => e)) as BootstateError;
    expect(error.code).toBe('USER_FAILED');
    expect(error.message).toBe('user failed: b: b broke');
    expect(error.data.slice(0, 2)).toEqual([['step', 'user'], ['backend', 'b']]);
    expect(Object.fromEntries(error.data)).toMatchObject({ command: 'b broke', exit_status: '1' });
  });

  it('reports an unknown backend name as the failure when it is the last one', async () => {
    await expect(tryBackends('password', 'PASSWORD_FAILED', ['chpasswd2'], {}, 'x', context, signal)).rejects.toMatchObject({
      code: 'PASSWORD_FAILED',
      message: 'password failed: chpasswd2: unknown password backend chpasswd2',
    });
  });

  it('lets input errors through unwrapped without trying the next backend', async () => {
    let second = false;
    const table = {
      a: async () => Promise.reject(new BootstateError('PASSWORD_TOO_LONG', 'too long')),
      b: async () => ((second = true), { backend: 'b' }),
    };
    await expect(tryBackends('password', 'PASSWORD_FAILED', ['a', 'b'], table, 'x', context, signal)).rejects.toMatchObject({ code: 'PASSWORD_TOO_LONG' });
    expect(second).toBe(false);
  });
});
