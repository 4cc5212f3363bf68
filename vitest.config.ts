import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // graphql must load once: its ESM and CJS builds together fail with "another module or realm".
    alias: { graphql: 'graphql/index.js' },
  },
  test: {
    include: ['test/**/*.test.ts'],
    // The live provider suite needs API keys and the internet: `npm run contract:live` runs it.
    exclude: ['test/live/**', 'node_modules/**'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
