import { configDefaults, defineConfig } from 'vitest/config';
import { BOOTED } from './vitest.boot.config.js';

// `npm test`: everything under test/ but the booted tests (`npm run test:boot`, vitest.boot.config.ts) and the soaks
// (`npm run soak`, vitest.soak.config.ts), which .ci/run runs after it.

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...BOOTED],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default'],
  },
});
