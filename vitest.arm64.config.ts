import { defineConfig } from 'vitest/config';
import { ARM64 } from './vitest.long.config.js';

/**
 * The arm64 boot (`npm run test:arm64`), which `.ci/run` runs after the long checks, as root on Linux: an arm64
 * Debian 12 root built with mmdebstrap (minutes under qemu-user, cached under /var/cache/bootstate-test), the arm64
 * .deb built and installed, two boots under systemd-nspawn with qemu-user emulation (test/boot/arm64.test.ts). It
 * fails rather than skips without root, namespaces, qemu-user-static or arch-test.
 */
export default defineConfig({
  test: {
    include: ARM64,
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    globalSetup: ['test/boot/needs-root.ts'],
    reporters: ['default'],
  },
});
