import { configDefaults, defineConfig } from 'vitest/config';
import { LONG } from './vitest.long.config.js';

// `npm test`: everything under test/ but the long checks (`npm run test:long`, vitest.long.config.ts) and the soaks
// (`npm run soak`, vitest.soak.config.ts), which .ci/run runs after it.

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...LONG],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default'],
  },
});
