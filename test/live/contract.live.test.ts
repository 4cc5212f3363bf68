// The provider contract suite against the real APIs. Each provider runs only when its key is set;
// otherwise the reason is printed and its tests are skipped. Models and hosts can be overridden
// (OPENAI_MODEL, OPENAI_BASE_URL, ANTHROPIC_MODEL, ANTHROPIC_BASE_URL) to certify what you will run.
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../clock.ts';
import { Config } from '../../config.ts';
import type { Core } from '../../core/core.ts';
import { createLogger } from '../../log.ts';
import { certifyProvider } from '../../providers/certification.ts';
import { OPERATIONS } from '../../providers/operations/index.ts';
import { ProviderRegistry } from '../../providers/registry.ts';
import { createTestDatabase } from '../helpers/database.ts';

const LIVE = [
  {
    name: 'openai-live',
    keyEnv: 'OPENAI_API_KEY',
    provider: {
      kind: 'openai',
      baseUrl: process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1',
      model: process.env.OPENAI_MODEL ?? 'gpt-4.1-mini',
      apiKeyEnv: 'OPENAI_API_KEY',
      timeoutMs: 120_000,
    },
  },
  {
    name: 'anthropic-live',
    keyEnv: 'ANTHROPIC_API_KEY',
    provider: {
      kind: 'anthropic',
      baseUrl: process.env.ANTHROPIC_BASE_URL ?? 'https://api.anthropic.com',
      model: process.env.ANTHROPIC_MODEL ?? 'claude-sonnet-4-5',
      apiKeyEnv: 'ANTHROPIC_API_KEY',
      timeoutMs: 120_000,
    },
  },
] as const;

for (const live of LIVE) {
  const hasKey = !!process.env[live.keyEnv];
  if (!hasKey) console.log(`${live.name}: skipped, ${live.keyEnv} is not set`);

  describe.skipIf(!hasKey)(`${live.name} (${live.provider.model})`, () => {
    const config = Config.parse({ providers: { [live.name]: live.provider, [`${live.name}-badkey`]: { ...live.provider, apiKeyEnv: 'ONEJOB_LIVE_BAD_KEY' } } });
    const core = async (): Promise<Core> => {
      const db = await createTestDatabase(`live_${live.name}`);
      return { pool: db.pool, clock: systemClock, config, providers: new ProviderRegistry(config), log: createLogger('warn') };
    };

    it('passes certification for every operation: each fixture, full round trip, checked against the contract', async () => {
      const records = await certifyProvider(await core(), live.name);
      for (const r of records) {
        expect(r.failures, `${r.operation}: ${JSON.stringify(r.failures)}`).toEqual([]);
        expect(r.passed).toBe(true);
      }
      expect(records.map((r) => r.operation).sort()).toEqual([...OPERATIONS.keys()].sort());
    });

    it('a rejected key is a definitive failure (FAILED), not UNKNOWN', async () => {
      process.env.ONEJOB_LIVE_BAD_KEY = 'not-a-real-key';
      const [record] = await certifyProvider(await core(), `${live.name}-badkey`, ['classify']);
      expect(record!.passed).toBe(false);
      expect(record!.failures[0]!.reason).toMatch(/HTTP 401/);
    });
  });
}
