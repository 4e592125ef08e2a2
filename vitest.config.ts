import { configDefaults, defineConfig } from 'vitest/config';
import { ARM64, LONG } from './vitest.long.config.js';

// `npm test`: everything under test/ but the long checks (`npm run test:long`, vitest.long.config.ts), the arm64
// package (`npm run test:arm64`) and the soaks (`npm run soak`, vitest.soak.config.ts), which .ci/run runs after it.

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...LONG, ...ARM64],
    pool: 'forks',
    // Two test files at a time: vitest's default on a 2-core machine is one (cores − 1), and most files wait on
    // subprocesses, servers and namespaces rather than compute; their timeouts carry a loaded machine's slack.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default'],
  },
});
