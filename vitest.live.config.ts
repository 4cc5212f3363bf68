// `npm run contract:live`: the provider contract suite against the real APIs, for whichever of
// OPENAI_API_KEY and ANTHROPIC_API_KEY is set. Never part of `npm test`.
import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.ts';

export default mergeConfig(base, defineConfig({ test: { include: ['test/live/**/*.live.test.ts'], exclude: ['node_modules/**'], testTimeout: 300_000 } }));
