import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import { CREATE_JOB, JOB, dataOf, errorCode, gql, summarizeInput } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { holdLock, waitForLockWaiters } from './helpers/holds.ts';
import { makeToken, startInstance, TEST_CONFIG, type Instance, type TestToken } from './helpers/instance.ts';

let db: TestDatabase;
let api: Instance;
let alice: TestToken;
let bob: TestToken;

async function counts() {
  const { rows } = await db.pool.query(`SELECT
    (SELECT count(*)::int FROM jobs) AS jobs, (SELECT count(*)::int FROM attempts) AS attempts,
    (SELECT count(*)::int FROM job_events) AS events, (SELECT count(*)::int FROM idempotency_keys) AS keys`);
  return rows[0];
}

beforeAll(async () => {
  db = await createTestDatabase('create_job');
  api = await startInstance(db.url);
  alice = await makeToken(db.pool, 'alice');
  bob = await makeToken(db.pool, 'bob');
});

describe('createJob', () => {
  it('answers a new job with attempt 1 already RUNNING on the manual primary, and its events', async () => {
    const res = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('first') }));
    expect(res.createJob.replayed).toBe(false);
    const job = res.createJob.job;
    expect(job).toMatchObject({ status: 'RUNNING', version: 1, result: null, completedBy: null, fallbackProviders: ['backup'] });
    expect(job.attempts).toHaveLength(1);
    expect(job.attempts[0]).toMatchObject({ number: 1, provider: 'primary', state: 'RUNNING', readVersion: 1, jobId: job.id });
    const expiresIn = Date.parse(job.keyExpiresAt) - Date.parse(job.createdAt);
    expect(expiresIn).toBe(3 * 86_400 * 1000);
    const { rows } = await db.pool.query('SELECT seq, type, attempt_state FROM job_events WHERE job_id = $1 ORDER BY seq', [job.id]);
    expect(rows).toEqual([
      { seq: 1, type: 'JOB_CREATED', attempt_state: null },
      { seq: 2, type: 'ATTEMPT_STARTED', attempt_state: 'STARTING' },
      { seq: 3, type: 'ATTEMPT_RUNNING', attempt_state: 'RUNNING' },
    ]);
  });

  it('double click: 50 concurrent identical requests make one job, one attempt, one JOB_CREATED', async () => {
    const key = 'double-click';
    // Every request must insert into idempotency_keys; holding a lock that blocks those inserts lines
    // them all up, so they reach the key at the same moment when it is released.
    const hold = await holdLock(db.pool, 'LOCK TABLE idempotency_keys IN SHARE ROW EXCLUSIVE MODE');
    const requests = Array.from({ length: 50 }, () => gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput(key) }));
    await waitForLockWaiters(db.pool, db.name, 20); // the app's pool holds 20 connections
    await hold.release();
    const answers = (await Promise.all(requests)).map((r) => dataOf(r).createJob);
    expect(new Set(answers.map((a) => a.job.id)).size).toBe(1);
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    const jobId = answers[0]!.job.id;
    const { rows } = await db.pool.query(
      `SELECT (SELECT count(*)::int FROM jobs WHERE owner_id = $2 AND idempotency_key = $3) AS jobs,
              (SELECT count(*)::int FROM attempts WHERE job_id = $1) AS attempts,
              (SELECT count(*)::int FROM job_events WHERE job_id = $1 AND type = 'JOB_CREATED') AS created`,
      [jobId, alice.caller.ownerId, key],
    );
    expect(rows[0]).toEqual({ jobs: 1, attempts: 1, created: 1 });
    for (const a of answers) expect(a.job.attempts.map((x: { id: string }) => x.id)).toEqual([answers[0]!.job.attempts[0].id]);
  });

  it('same key, different request: IDEMPOTENCY_KEY_REUSED naming the holder, and nothing written', async () => {
    const first = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('reused') }));
    const before = await counts();
    for (const change of [
      { input: { text: 'Something else entirely, and longer than a summary.' } },
      { provider: 'backup', fallbackProviders: [] },
      { fallbackProviders: [] },
      { attemptTimeoutMs: 5000 },
      { operation: 'classify', input: { text: 'x', labels: ['a', 'b'] } },
    ]) {
      const res = await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('reused', change) });
      expect(errorCode(res)).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(res.errors![0]!.extensions!.jobId).toBe(first.createJob.job.id);
      expect(res.errors![0]!.message).toMatch(/different request/);
    }
    expect(await counts()).toEqual(before);
  });

  it('the fingerprint is canonical: key order and an omitted default do not change it', async () => {
    const a = dataOf(
      await gql(api.graphqlUrl, alice.token, CREATE_JOB, {
        input: { idempotencyKey: 'canonical', operation: 'classify', provider: 'primary', input: { text: 't', labels: ['x', 'y'] } },
      }),
    );
    const b = dataOf(
      await gql(api.graphqlUrl, alice.token, CREATE_JOB, {
        input: { idempotencyKey: 'canonical', operation: 'classify', provider: 'primary', fallbackProviders: [], input: { labels: ['x', 'y'], text: 't' } },
      }),
    );
    expect(b.createJob).toMatchObject({ replayed: true, job: { id: a.createJob.job.id } });
    const reordered = await gql(api.graphqlUrl, alice.token, CREATE_JOB, {
      input: { idempotencyKey: 'canonical', operation: 'classify', provider: 'primary', input: { text: 't', labels: ['y', 'x'] } },
    });
    expect(errorCode(reordered)).toBe('IDEMPOTENCY_KEY_REUSED'); // array order is meaning
  });

  it('same key, another owner: a separate job; neither owner sees the other one', async () => {
    const a = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('shared-key') })).createJob;
    const b = dataOf(await gql(api.graphqlUrl, bob.token, CREATE_JOB, { input: summarizeInput('shared-key') })).createJob;
    expect(b.replayed).toBe(false);
    expect(b.job.id).not.toBe(a.job.id);
    expect(dataOf(await gql(api.graphqlUrl, bob.token, JOB, { id: a.job.id })).job).toBeNull();
    const cancel = await gql(api.graphqlUrl, bob.token, 'mutation($id: ID!) { cancelJob(jobId: $id) { id } }', { id: a.job.id });
    expect(errorCode(cancel)).toBe('NOT_FOUND');
  });
});

describe('key expiry (rule 5)', () => {
  let clock: ManualClock;
  let timed: Instance;

  beforeAll(async () => {
    clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
    const config = { ...TEST_CONFIG, idempotency: { senderRetryWindowSeconds: 60 } };
    timed = await startInstance(db.url, { clock, config, sweepDeadlines: false });
  });

  it('replays until keyExpiresAt, then the same key makes a new job and the old one stays readable', async () => {
    const first = dataOf(await gql(timed.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('expiring') })).createJob;
    expect(first.job.keyExpiresAt).toBe('2026-01-01T00:03:00.000Z'); // 3 × 60 s
    clock.advance(180_000 - 1);
    const stillHeld = dataOf(await gql(timed.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('expiring') })).createJob;
    expect(stillHeld).toMatchObject({ replayed: true, job: { id: first.job.id } });
    clock.advance(1);
    const fresh = dataOf(await gql(timed.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('expiring') })).createJob;
    expect(fresh.replayed).toBe(false);
    expect(fresh.job.id).not.toBe(first.job.id);
    expect(dataOf(await gql(timed.graphqlUrl, alice.token, JOB, { id: first.job.id })).job.id).toBe(first.job.id);
    const byKey = dataOf(await gql(timed.graphqlUrl, alice.token, 'query($k: String!) { jobByKey(idempotencyKey: $k) { id } }', { k: 'expiring' }));
    expect(byKey.jobByKey.id).toBe(fresh.job.id);
    // Even a different request may use an expired key: it no longer guards anything.
    clock.advance(180_000);
    const other = await gql(timed.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput('expiring', { fallbackProviders: [] }) });
    expect(dataOf(other).createJob.replayed).toBe(false);
  });
});
