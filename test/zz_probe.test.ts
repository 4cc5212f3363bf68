import { expect, it } from 'vitest';
import { Config } from '../config.ts';
import { startOpenAIFake } from './fakes/openaiFake.ts';
import { createTestDatabase } from './helpers/database.ts';
import { CREATE_JOB, dataOf, gql } from './helpers/graphql.ts';
import { makeToken, startInstance } from './helpers/instance.ts';
import { eventually } from './helpers/adapterCalls.ts';

it('probe', async () => {
  const db = await createTestDatabase('probe');
  const fake = await startOpenAIFake({ apiKey: 'k' });
  process.env.PROBE_KEY = 'k';
  const config = Config.parse({ providers: { gpt: { kind: 'openai', baseUrl: fake.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: 'PROBE_KEY' } } });
  const api = await startInstance(db.url, { config });
  const owner = await makeToken(db.pool, 'o');
  const create = async (key: string, t?: number) => dataOf(await gql(api.graphqlUrl, owner.token, CREATE_JOB, { input: { idempotencyKey: key, operation: 'summarize', provider: 'gpt', input: { text: 'The quick brown fox jumps over the lazy dog, twice.' }, ...(t ? { attemptTimeoutMs: t } : {}) } })).createJob.job;
  const warm = await create('warm');
  await eventually(async () => (await db.pool.query(`SELECT 1 FROM attempts WHERE job_id = $1 AND state = 'SUCCEEDED'`, [warm.id])).rows[0], 'warm');
  await db.pool.query(`CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.prompt_tokens IS DISTINCT FROM OLD.prompt_tokens THEN PERFORM pg_sleep(0.6); END IF; RETURN NEW; END $$;
    CREATE TRIGGER stall BEFORE UPDATE ON attempts FOR EACH ROW EXECUTE FUNCTION stall();`);
  const job = await create('late', 300);
  const id = job.attempts[0].id;
  await eventually(async () => (await db.pool.query(`SELECT 1 FROM attempts WHERE id = $1 AND state <> 'STARTING'`, [id])).rows[0], 'settled');
  await new Promise((r) => setTimeout(r, 1000));
  const { rows } = await db.pool.query('SELECT state FROM attempts WHERE id = $1', [id]);
  console.log('PROBE', rows[0].state, fake.requests.filter((r) => r.idempotencyKey === id).map((r) => ({ answer: r.answer, closed: r.closedByClient, status: r.status })));
  await api.stop(); await fake.stop();
});
