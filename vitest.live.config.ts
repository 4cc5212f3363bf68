// `npm run contract:live`: the provider contract suite against the real APIs, for whichever of
// OPENAI_API_KEY and ANTHROPIC_API_KEY is set. Never part of `npm test`.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { alias: { graphql: 'graphql/index.js' } },
  test: {
    include: ['test/live/**/*.live.test.ts'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
