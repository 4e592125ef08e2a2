/** The stderr log level from the environment: BOOTSTATE_LOG, else azure-init's AZURE_INIT_LOG (a tracing filter). */
import { describe, expect, it } from 'vitest';
import { levelFromEnv } from '../src/logging/log.js';

describe('levelFromEnv', () => {
  it('reads BOOTSTATE_LOG, and AZURE_INIT_LOG as its alias', () => {
    expect(levelFromEnv({ BOOTSTATE_LOG: 'warn' })).toBe('warn');
    expect(levelFromEnv({ AZURE_INIT_LOG: 'debug' })).toBe('debug');
  });

  it('prefers BOOTSTATE_LOG when both are set', () => {
    expect(levelFromEnv({ BOOTSTATE_LOG: 'error', AZURE_INIT_LOG: 'debug' })).toBe('error');
  });

  it('takes the bare level of a tracing filter such as "info,libazureinit=debug"', () => {
    expect(levelFromEnv({ AZURE_INIT_LOG: 'libazureinit=trace, INFO' })).toBe('info');
  });

  it('is undefined when neither names a level', () => {
    expect(levelFromEnv({})).toBeUndefined();
    expect(levelFromEnv({ BOOTSTATE_LOG: 'loud', AZURE_INIT_LOG: 'libazureinit=debug' })).toBeUndefined();
  });
});
