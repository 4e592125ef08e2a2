import { defineConfig } from 'vitest/config';

/**
 * The booted tests (`npm run test:boot`): real Debian boots under systemd-nspawn (test/boot/*.test.ts), minutes each,
 * so not part of `npm test`. `.ci/run` runs them after `npm test`, as root on Linux; they need root and namespaces,
 * and here they fail rather than skip without them (test/boot/needs-root.ts).
 */
export const BOOTED = ['test/boot/**/*.test.ts'];

export default defineConfig({
  test: {
    include: BOOTED,
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    globalSetup: ['test/boot/needs-root.ts'],
    reporters: ['default'],
  },
});
