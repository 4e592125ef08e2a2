import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The long checks (`npm run test:long`), not part of `npm test`: the booted tests (real Debian boots under
 * systemd-nspawn, test/boot/*.test.ts), every page looked at in headless Chromium under three font setups
 * (test/inspect/browser-pages.test.ts), and the wireserver firewall with the real nft and iptables in a network
 * namespace (test/firewall/firewall.test.ts: two minutes, most of it the 5 s each "nobody is kept out" probe waits). `.ci/run` runs them after `npm test`, as root on Linux; they need root and
 * namespaces, and here they fail rather than skip without them (test/boot/needs-root.ts).
 */
export const LONG = ['test/boot/**/*.test.ts', 'test/inspect/browser-pages.test.ts', 'test/firewall/firewall.test.ts'];
/**
 * The arm64 package (`npm run test:arm64`, vitest.arm64.config.ts): its build and runs under qemu-user
 * (test/packaging/arm64.test.ts) and its boot (test/boot/arm64.test.ts), minutes of emulation, a script of its own.
 */
export const ARM64 = ['test/boot/arm64.test.ts', 'test/packaging/arm64.test.ts'];

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
