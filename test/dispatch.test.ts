// Sending attempts to providers: exactly one caller per attempt, nothing sent twice after a crash,
// reconciliation of UNKNOWN attempts, and failover only to certified providers.
import { beforeAll, describe, expect, it } from 'vitest';
import { Config } from '../config.ts';
import { claimAttemptsToDispatch } from '../db/dispatch.ts';
import { certifyProvider } from '../providers/certification.ts';
import { CANCEL_ATTEMPT, CREATE_JOB, JOB, RETRY_JOB, dataOf, errorCode, gql, summarizeInput } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';
import { eventTypes, report } from './helpers/scenario.ts';
import { spawnInstance } from './helpers/spawnInstance.ts';
import { waitUntil } from './helpers/waitFor.ts';
import { startOpenAIFake, type OpenAIFake } from './fakes/openaiFake.ts';

let db: TestDatabase;
let fake: OpenAIFake;
let config: Config;
let owner: TestToken;
let operator: TestToken;

const KEY_ENV = 'ONEJOB_TEST_DISPATCH_KEY';

beforeAll(async () => {
  db = await createTestDatabase('dispatch');
  fake = await startOpenAIFake({ apiKey: 'dispatch-key' });
  process.env[KEY_ENV] = 'dispatch-key';
  config = Config.parse({
    providers: {
      gpt: { kind: 'openai', baseUrl: fake.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: KEY_ENV, timeoutMs: 30_000 },
      bg: { kind: 'openai', api: 'responses', baseUrl: fake.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: KEY_ENV, timeoutMs: 30_000 },
      backup: { kind: 'manual' },
      picky: { kind: 'sim', behaviour: 'wrong_label', latencyMs: 0 },
      good: { kind: 'sim', behaviour: 'ok', latencyMs: 0 },
      failing: { kind: 'sim', behaviour: 'fail', latencyMs: 0 },
    },
  });
  owner = await makeToken(db.pool, 'dispatch-owner');
  operator = await makeToken(db.pool, 'dispatch-ops', 'operator');
});

const requestsFor = (attemptId: string) => fake.requests.filter((r) => r.idempotencyKey === attemptId);

async function attemptRow(id: string) {
  return (await db.pool.query('SELECT * FROM attempts WHERE id = $1', [id])).rows[0];
}

async function create(api: Instance, key: string, extra: Record<string, unknown>) {
  return dataOf(await gql(api.graphqlUrl, owner.token, CREATE_JOB, { input: summarizeInput(key, extra) })).createJob.job;
}

describe('one caller per attempt', () => {
  it('two instances woken together send each attempt exactly once', async () => {
    const a = await startInstance(db.url, { config });
    const b = await startInstance(db.url, { config });
    const front = await startInstance(db.url, { config, dispatchAttempts: false });
    fake.script({ kind: 'delay', ms: 100, times: 30 });
    const jobs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => create(front, `two-instances-${i}`, { provider: 'gpt', fallbackProviders: [] })),
    );
    const attemptIds = jobs.map((j) => j.attempts[0].id as string);
    await waitUntil(async () => {
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM attempts WHERE id = ANY($1) AND state = 'SUCCEEDED'`, [attemptIds]);
      return rows[0].n === attemptIds.length;
    }, 'all 30 attempts to succeed');
    for (const id of attemptIds) expect(requestsFor(id)).toHaveLength(1);
    const { rows } = await db.pool.query('SELECT DISTINCT dispatched_by FROM attempts WHERE id = ANY($1)', [attemptIds]);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    for (const r of rows) expect([a.app.runner.instanceId, b.app.runner.instanceId]).toContain(r.dispatched_by);
    await Promise.all([a.stop(), b.stop(), front.stop()]);
  });

  it('an instance killed mid-call leaves its attempt to go UNKNOWN, and nobody sends it again', async () => {
    const child = await spawnInstance(db.url, config);
    const job = dataOf(
      await gql(child.graphqlUrl, owner.token, CREATE_JOB, { input: summarizeInput('killed', { provider: 'gpt', fallbackProviders: ['backup'], attemptTimeoutMs: 1_500 }) }),
    ).createJob.job;
    const attemptId = job.attempts[0].id as string;
    fake.script({ kind: 'hang', idempotencyKey: attemptId });
    await fake.waitForRequest((r) => r.idempotencyKey === attemptId);
    await child.kill();

    const survivor = await startInstance(db.url, { config });
    await waitUntil(async () => (await attemptRow(attemptId)).state === 'UNKNOWN', 'the orphaned attempt to go UNKNOWN');
    // Nothing is left for any runner to claim, and the provider saw one request.
    expect(await claimAttemptsToDispatch(db.pool, { instanceId: 'probe', now: new Date(), limit: 100 })).toEqual([]);
    expect(requestsFor(attemptId)).toHaveLength(1);
    const types = await eventTypes(db.pool, job.id);
    expect(types).toContain('ATTEMPT_UNKNOWN');
    expect(types).not.toContain('ATTEMPT_FAILED');
    await survivor.stop();
  });
});

describe('reconciliation', () => {
  let api: Instance;
  beforeAll(async () => {
    api = await startInstance(db.url, { config });
  });

  it('settles an UNKNOWN attempt from the provider’s retrieve endpoint', async () => {
    const job = await create(api, 'reconcile', { provider: 'bg', fallbackProviders: [], attemptTimeoutMs: 400 });
    const attemptId = job.attempts[0].id as string;
    await waitUntil(async () => (await attemptRow(attemptId)).state === 'UNKNOWN', 'the background attempt to pass its deadline');
    const { provider_request_id: responseId } = await attemptRow(attemptId);
    expect(responseId).toMatch(/^resp_/);
    fake.responses.complete(responseId);
    const done = await waitUntil(async () => {
      const j = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job;
      return j.status === 'SUCCEEDED' ? j : undefined;
    }, 'reconciliation to settle the attempt');
    expect(done.completedBy.id).toBe(attemptId);
    expect(requestsFor(attemptId).filter((r) => r.endpoint === 'responses.create')).toHaveLength(1);
  });

  it('a late result after a cancel is DISCARDED when another attempt already won', async () => {
    // The provider takes 3 s to answer attempt 1; meanwhile an operator gives up on it and the fallback wins.
    const job = await create(api, 'late-after-cancel', { provider: 'gpt', fallbackProviders: ['backup'], attemptTimeoutMs: 20_000 });
    const attempt1 = job.attempts[0].id as string;
    fake.script({ kind: 'delay', ms: 3_000, idempotencyKey: attempt1 });
    await fake.waitForRequest((r) => r.idempotencyKey === attempt1);
    dataOf(await gql(api.graphqlUrl, operator.token, CANCEL_ATTEMPT, { attemptId: attempt1, reason: 'stuck' }));
    const attempt2 = dataOf(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id, provider: 'backup' })).retryJob;
    expect(dataOf(await report(api, operator.token, attempt2.id, { result: { summary: 'Fox.', keyPoints: ['fox'] } })).reportAttemptResult.outcome).toBe('WON');
    expect((await attemptRow(attempt1)).state).toBe('CANCELLED'); // the slow answer has not come yet

    await waitUntil(async () => (await attemptRow(attempt1)).state === 'DISCARDED', 'the late answer to be discarded');
    const after = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job;
    expect(after).toMatchObject({ status: 'SUCCEEDED', version: 2, completedBy: { id: attempt2.id }, result: { summary: 'Fox.' } });
    const { rows } = await db.pool.query('SELECT loser_attempt_id, winner_attempt_id FROM race_log WHERE job_id = $1', [job.id]);
    expect(rows).toEqual([{ loser_attempt_id: attempt1, winner_attempt_id: attempt2.id }]);
    expect(requestsFor(attempt1)).toHaveLength(1);
  });
});

describe('failover only to what is certified', () => {
  let api: Instance;
  beforeAll(async () => {
    api = await startInstance(db.url, { config });
  });

  it('a provider that breaks the business rule fails certification, and failover to it is blocked', async () => {
    const [cert] = await certifyProvider(api.app.core, 'picky', ['classify']);
    expect(cert).toMatchObject({ passed: false, operation: 'classify' });
    expect(cert!.failures.length).toBe(cert!.fixtures);
    expect(cert!.failures[0]!.reason).toMatch(/business rule/);

    const job = await create(api, 'blocked', { provider: 'failing', fallbackProviders: ['picky'], operation: 'classify', input: { text: 'I love it', labels: ['positive', 'negative'] } });
    const failed = await waitUntil(async () => {
      const j = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job;
      return j.status === 'FAILED' ? j : undefined;
    }, 'the primary to fail');
    expect(failed.attempts).toHaveLength(1);
    const { rows } = await db.pool.query(`SELECT provider, message FROM job_events WHERE job_id = $1 AND type = 'FALLBACK_BLOCKED'`, [job.id]);
    expect(rows).toEqual([{ provider: 'picky', message: expect.stringMatching(/no passing contract certification for classify/) }]);
    expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id, provider: 'picky' }))).toBe('PROVIDER_NOT_CERTIFIED');
  });

  it('once certified, failover proceeds by itself; a changed template version withdraws it', async () => {
    const [cert] = await certifyProvider(api.app.core, 'good', ['summarize']);
    expect(cert).toMatchObject({ passed: true, failures: [] });
    expect(cert!.fixtures).toBeGreaterThan(0);
    expect(cert!.promptTokens).toBeGreaterThan(0);

    const job = await create(api, 'fails-over', { provider: 'failing', fallbackProviders: ['good'] });
    const done = await waitUntil(async () => {
      const j = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job;
      return j.status === 'SUCCEEDED' ? j : undefined;
    }, 'the certified fallback to answer');
    expect(done.attempts.map((a: { provider: string; state: string }) => `${a.provider}:${a.state}`)).toEqual(['failing:FAILED', 'good:SUCCEEDED']);

    // The operation's prompt moves on: a certificate earned under the old version no longer counts.
    await db.pool.query(`UPDATE certifications SET template_version = 'summarize-v0' WHERE provider = 'good'`);
    const blocked = await create(api, 'template-changed', { provider: 'failing', fallbackProviders: ['good'] });
    await waitUntil(async () => (dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: blocked.id })).job.status === 'FAILED'), 'the job to fail');
    expect(await eventTypes(db.pool, blocked.id)).toContain('FALLBACK_BLOCKED');

    const providers = dataOf(await gql(api.graphqlUrl, owner.token, '{ providers { name kind certifiedOperations certifications { operation passed current } } }')).providers;
    expect(providers.find((p: { name: string }) => p.name === 'good')).toMatchObject({ kind: 'sim', certifiedOperations: [], certifications: [{ operation: 'summarize', passed: true, current: false }] });
    expect(providers.find((p: { name: string }) => p.name === 'backup')).toMatchObject({ kind: 'manual', certifiedOperations: ['summarize', 'classify'] });
  });
});
