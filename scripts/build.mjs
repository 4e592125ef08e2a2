// Bundles the CLI into one ESM file that runs with no node_modules beside it.
import { build } from 'esbuild';

await build({
  entryPoints: ['src/cli.ts'],
  outfile: 'dist/bootstate.mjs',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __bootstateCreateRequire } from 'node:module'; const require = __bootstateCreateRequire(import.meta.url);",
  },
  legalComments: 'none',
  logLevel: 'warning',
});
