// Deliberate expiry: every deduplication store loses its keys at the documented time, in bounded
// batches, never before, and never takes a job or its history with it.
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import { sweepExpiredKeys } from '../core/keyExpiry.ts';
import { CREATE_JOB, JOB, dataOf, gql, summarizeInput } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';

let db: TestDatabase;
let api: Instance;
let clock: ManualClock;
let owner: TestToken;
const T0 = Date.parse('2026-06-01T00:00:00Z');
const DAY = 86_400_000;

beforeAll(async () => {
  db = await createTestDatabase('expiry');
  clock = new ManualClock(T0);
  api = await startInstance(db.url, { clock, sweepDeadlines: false, expireKeys: false });
  owner = await makeToken(db.pool, 'expiry-owner');
});

/** `n` jobs whose keys expire at `expiresAt`, written directly: a backlog as a busy day leaves it. */
async function seedKeys(prefix: string, n: number, expiresAt: Date): Promise<void> {
  await db.pool.query(
    `WITH made AS (
       INSERT INTO jobs (id, owner_id, idempotency_key, operation, provider, input, fingerprint, created_at, key_expires_at)
       SELECT gen_random_uuid(), $1, $2 || i, 'summarize', 'primary', '{"text":"x"}', 'seeded', $3::timestamptz - interval '3 days', $3
       FROM generate_series(1, $4) AS i
       RETURNING id, owner_id, idempotency_key, created_at, key_expires_at
     )
     INSERT INTO idempotency_keys (owner_id, idempotency_key, job_id, created_at, expires_at)
     SELECT owner_id, idempotency_key, id, created_at, key_expires_at FROM made`,
    [owner.caller.ownerId, prefix, expiresAt, n],
  );
}

const count = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows[0].n as number;

describe('the expiry sweep', () => {
  it('removes exactly the expired keys, in batches, while createJob runs under load, and no job', async () => {
    const now = clock.now();
    await seedKeys('old-', 2_500, new Date(now.getTime() - 1)); // expired a millisecond ago
    await seedKeys('due-now-', 200, now); // expires exactly now: expired ("at keyExpiresAt")
    await seedKeys('fresh-', 300, new Date(now.getTime() + 1)); // not yet
    const jobsBefore = await count('SELECT count(*)::int AS n FROM jobs');

    // createJob traffic during the sweep: new keys, and replays of keys that are still in force.
    const traffic = Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        gql(api.graphqlUrl, owner.token, CREATE_JOB, { input: summarizeInput(`during-${Math.floor(i / 2)}`) }),
      ),
    );
    const report = await sweepExpiredKeys(api.app.core, { intervalMs: 0, batchSize: 500, maxBatchesPerPass: 100 });
    const answers = (await traffic).map((r) => dataOf(r).createJob);

    expect(report.removed.idempotency_keys).toBe(2_700);
    expect(report.batches.idempotency_keys).toBe(6); // 500 at a time
    expect(await count(`SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key LIKE 'fresh-%'`)).toBe(300);
    expect(await count(`SELECT count(*)::int AS n FROM idempotency_keys WHERE expires_at <= $1`, [now])).toBe(0);
    // Expiry deletes keys, never the jobs (or attempts, or events) they guarded.
    expect(await count('SELECT count(*)::int AS n FROM jobs')).toBe(jobsBefore + 30);
    expect(new Set(answers.map((a) => a.job.id)).size).toBe(30);
    expect(answers.filter((a) => !a.replayed)).toHaveLength(30);
  });

  it('a pass is bounded: a backlog larger than one pass is finished by the next', async () => {
    await seedKeys('backlog-', 1_000, new Date(clock.now().getTime() - DAY));
    const options = { intervalMs: 0, batchSize: 100, maxBatchesPerPass: 4 };
    expect((await sweepExpiredKeys(api.app.core, options)).removed.idempotency_keys).toBe(400);
    expect((await sweepExpiredKeys(api.app.core, options)).removed.idempotency_keys).toBe(400);
    expect((await sweepExpiredKeys(api.app.core, options)).removed.idempotency_keys).toBe(200);
  });

  it('after its key is swept, the same key makes a new job; the old one stays readable by id', async () => {
    const first = dataOf(await gql(api.graphqlUrl, owner.token, CREATE_JOB, { input: summarizeInput('swept') })).createJob;
    clock.advance(3 * DAY); // keyExpiresAt: creation + 3 × 86400 s
    await sweepExpiredKeys(api.app.core, { intervalMs: 0, batchSize: 500, maxBatchesPerPass: 10 });
    expect(await count(`SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key = 'swept'`)).toBe(0);
    const again = dataOf(await gql(api.graphqlUrl, owner.token, CREATE_JOB, { input: summarizeInput('swept') })).createJob;
    expect(again.replayed).toBe(false);
    expect(again.job.id).not.toBe(first.job.id);
    expect(dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: first.job.id })).job.id).toBe(first.job.id);
  });

  it('webhook natural keys and delivered notification keys expire too; a notification still being retried does not', async () => {
    const job = dataOf(await gql(api.graphqlUrl, owner.token, CREATE_JOB, { input: summarizeInput('stores') })).createJob.job;
    const now = clock.now();
    const past = new Date(now.getTime() - 1);
    await db.pool.query(
      `INSERT INTO webhook_deliveries (provider, request_id, status, attempt_id, outcome, received_at, expires_at, webhook_id)
       VALUES ('p', 'expired', 'succeeded', $1, 'WON', $2::timestamptz - interval '3 days', $2, 'msg_1'),
              ('p', 'in-force', 'succeeded', $1, 'WON', $3::timestamptz - interval '1 day', $3::timestamptz + interval '2 days', 'msg_2')`,
      [job.attempts[0].id, past, now],
    );
    const outbox = (key: string, delivered: boolean) =>
      db.pool.query(
        `INSERT INTO callback_outbox (effect_key, owner_id, job_id, url, secret, body, created_at, expires_at, next_attempt_at, delivered_at)
         VALUES ($1, $2, $3, 'http://127.0.0.1:9/', 'whsec_AAAA', '{}', $4::timestamptz - interval '3 days', $4, $4::timestamptz + interval '1 year', $5)`,
        [key, owner.caller.ownerId, job.id, past, delivered ? past : null],
      );
    await outbox(`job:${job.id}:succeeded`, true);
    await outbox(`job:${job.id}:failed`, false);
    const report = await sweepExpiredKeys(api.app.core, { intervalMs: 0, batchSize: 500, maxBatchesPerPass: 10 });
    expect(report.removed.webhook_deliveries).toBe(1);
    expect(report.removed.callback_outbox).toBe(1);
    expect((await db.pool.query('SELECT request_id FROM webhook_deliveries')).rows).toEqual([{ request_id: 'in-force' }]);
    expect((await db.pool.query('SELECT effect_key FROM callback_outbox')).rows).toEqual([{ effect_key: `job:${job.id}:failed` }]);
  });

  it('the size of each store is a metric', async () => {
    const instance = await startInstance(db.url, { clock, sweepDeadlines: false }); // sweeps once at start
    const held = await count('SELECT count(*)::int AS n FROM idempotency_keys');
    let text = '';
    for (let tries = 0; !text.includes('onejob_dedup_keys{store="callback_outbox"}') && tries < 200; tries++) {
      text = await (await fetch(`${instance.url}/metrics`)).text();
      if (!text.includes('onejob_dedup_keys{store="callback_outbox"}')) await new Promise((r) => setTimeout(r, 25)); // poll interval
    }
    expect(text).toContain(`onejob_dedup_keys{store="idempotency_keys"} ${held}`);
    expect(text).toMatch(/onejob_dedup_keys\{store="webhook_deliveries"\} \d+/);
    expect(text).toMatch(/onejob_dedup_keys_expired_total\{store="callback_outbox"\} \d+/);
    await instance.stop();
  });
});
