import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The long checks (`npm run test:long`), not part of `npm test`: the booted tests (real Debian boots under
 * systemd-nspawn, test/boot/*.test.ts) and every page looked at in headless Chromium under three font setups
 * (test/inspect/browser-pages.test.ts). `.ci/run` runs them after `npm test`, as root on Linux; they need root and
 * namespaces, and here they fail rather than skip without them (test/boot/needs-root.ts).
 */
export const LONG = ['test/boot/**/*.test.ts', 'test/inspect/browser-pages.test.ts'];
/** The arm64 boot (`npm run test:arm64`, vitest.arm64.config.ts): minutes of emulation, a script of its own. */
export const ARM64 = ['test/boot/arm64.test.ts'];

export default defineConfig({
  test: {
    include: LONG,
    exclude: [...configDefaults.exclude, ...ARM64],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    globalSetup: ['test/boot/needs-root.ts'],
    reporters: ['default'],
  },
});
