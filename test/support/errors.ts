/** Test helper: the BootstateError a promise rejects with (fails the test when it resolves or throws anything else). */
import { expect } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';

export async function errorOf(promise: Promise<unknown>): Promise<BootstateError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(BootstateError);
    return error as BootstateError;
  }
  throw new Error('expected a failure');
}
