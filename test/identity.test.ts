// Every layer honours the same identity: the client's Idempotency-Key at the HTTP edge is the job's
// key; the attempt's id is the provider request's Idempotency-Key; the effect key is the outbound
// notification's webhook-id and Idempotency-Key, and the ledger entry's key.
import { beforeAll, describe, expect, it } from 'vitest';
import { Config } from '../config.ts';
import { CREATE_JOB, dataOf, gql, summarizeInput } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhookReceiver.ts';
import { waitUntil } from './helpers/waitFor.ts';
import { startOpenAIFake, type OpenAIFake } from './fakes/openaiFake.ts';

let db: TestDatabase;
let api: Instance;
let fake: OpenAIFake;
let receiver: WebhookReceiver;
let owner: TestToken;

async function createWithHeader(key: string, header: string | undefined, extra: Record<string, unknown> = {}) {
  const res = await fetch(api.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${owner.token}`,
      ...(header !== undefined ? { 'idempotency-key': header } : {}),
    },
    body: JSON.stringify({ query: CREATE_JOB, variables: { input: summarizeInput(key, extra) } }),
  });
  return { headers: res.headers, body: (await res.json()) as { data?: any; errors?: { extensions: { code: string; field?: string } }[] } };
}

beforeAll(async () => {
  db = await createTestDatabase('identity');
  fake = await startOpenAIFake({ apiKey: 'identity-key' });
  process.env.ONEJOB_TEST_IDENTITY_KEY = 'identity-key';
  const config = Config.parse({
    providers: {
      primary: { kind: 'manual' },
      backup: { kind: 'manual' },
      gpt: { kind: 'openai', baseUrl: fake.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: 'ONEJOB_TEST_IDENTITY_KEY' },
    },
  });
  api = await startInstance(db.url, { config });
  owner = await makeToken(db.pool, 'identity-owner');
  receiver = await startWebhookReceiver();
});

describe('at the HTTP edge', () => {
  it('an Idempotency-Key header equal to the input key is accepted; a replay says so in a header too', async () => {
    const first = await createWithHeader('edge-1', 'edge-1');
    expect(first.body.data.createJob.replayed).toBe(false);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await createWithHeader('edge-1', 'edge-1');
    expect(again.body.data.createJob).toMatchObject({ replayed: true, job: { id: first.body.data.createJob.job.id } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const withoutHeader = await createWithHeader('edge-1', undefined);
    expect(withoutHeader.headers.get('idempotent-replayed')).toBe('true');
  });

  it('a header that names another key is refused with BAD_USER_INPUT, and nothing is written', async () => {
    const before = (await db.pool.query('SELECT count(*)::int AS n FROM jobs')).rows[0].n;
    const refused = await createWithHeader('edge-2', 'edge-other');
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.idempotencyKey' });
    expect(refused.body.data?.createJob ?? null).toBeNull();
    expect((await db.pool.query('SELECT count(*)::int AS n FROM jobs')).rows[0].n).toBe(before);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key IN ('edge-2', 'edge-other')`)).rows[0].n).toBe(0);
  });
});

describe('from the edge to the provider and back out', () => {
  it('one intent carries its identities through every layer', async () => {
    const set = dataOf(
      await gql(api.graphqlUrl, owner.token, `mutation($url: String!) { setCallback(url: $url) { url secret } }`, { url: `${receiver.url}/hooks` }),
    ).setCallback;
    receiver.script('/hooks', { secret: set.secret });

    const created = await createWithHeader('order-77', 'order-77', { provider: 'gpt', fallbackProviders: [] });
    const job = created.body.data.createJob.job;
    const attemptId = job.attempts[0].id as string;

    // The provider saw the attempt's id as the request's idempotency key, once.
    await waitUntil(async () => fake.requests.some((r) => r.idempotencyKey === attemptId), 'the provider call');
    expect(fake.requests.filter((r) => r.idempotencyKey === attemptId)).toHaveLength(1);

    // The outbound notification carries the effect key as webhook-id and Idempotency-Key.
    const effectKey = `job:${job.id}:succeeded`;
    const [callback] = await waitUntil(async () => (receiver.at('/hooks', effectKey).length ? receiver.at('/hooks', effectKey) : undefined), 'the callback');
    expect(callback!.headers['idempotency-key']).toBe(effectKey);
    expect(callback!.verified).toBe(true);
    expect(JSON.parse(callback!.body)).toMatchObject({ type: 'job.succeeded', jobId: job.id, idempotencyKey: 'order-77', status: 'SUCCEEDED', version: 2 });

    // And the debit is recorded once, under its own effect key.
    const usage = dataOf(await gql(api.graphqlUrl, owner.token, '{ usage { total entries { jobId effectKey units } } }')).usage;
    expect(usage.entries).toEqual([{ jobId: job.id, effectKey: `job:${job.id}:charge`, units: expect.any(Number) }]);
  });
});
