import { defineConfig } from 'vitest/config';

// The soaks (test/soak/*.soak.ts): long runs of booted VMs, never part of `npm test`; `npm run soak` runs them.
export default defineConfig({
  test: {
    include: ['test/soak/**/*.soak.ts'],
    pool: 'forks',
    testTimeout: 24 * 3_600_000,
    hookTimeout: 1_200_000,
    reporters: ['default'],
  },
});
