// Timeouts, retries and cancels of attempts (rules 7–9, 15).
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import { CANCEL_ATTEMPT, CANCEL_JOB, JOB, RETRY_JOB, dataOf, errorCode, gql } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { holdJob, waitForLockWaiters } from './helpers/holds.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';
import { cancelAttemptOk, createSummarizeJob, eventTypes, report, retryOk, timeOut } from './helpers/scenario.ts';

let db: TestDatabase;
let api: Instance;
let clock: ManualClock;
let owner: TestToken;
let operator: TestToken;
const RESULT = { summary: 'A fox.', keyPoints: ['fox'] };

beforeAll(async () => {
  db = await createTestDatabase('attempts');
  clock = new ManualClock();
  api = await startInstance(db.url, { clock, sweepDeadlines: false });
  owner = await makeToken(db.pool, 'owner');
  operator = await makeToken(db.pool, 'ops', 'operator');
});

const jobOf = async (id: string) => dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id })).job;

describe('a timeout is UNKNOWN, never FAILED (rule 9)', () => {
  it('turns the attempt UNKNOWN at its deadline and not a millisecond before', async () => {
    const job = await createSummarizeJob(api, owner.token, 'deadline', { attemptTimeoutMs: 5_000 });
    expect(await timeOut(api, clock, 4_999)).toBe(0);
    expect((await jobOf(job.id)).attempts[0].state).toBe('RUNNING');
    expect(await timeOut(api, clock, 1)).toBe(1);
    const after = await jobOf(job.id);
    expect(after).toMatchObject({ status: 'UNKNOWN', version: 1 });
    expect(after.attempts[0]).toMatchObject({ state: 'UNKNOWN', finishedAt: null, error: null });
    expect((await eventTypes(db.pool, job.id)).at(-1)).toBe('ATTEMPT_UNKNOWN');
    // No fallback starts by itself from UNKNOWN (rule 10), and later sweeps leave it alone.
    expect(await timeOut(api, clock, 3_600_000)).toBe(0);
    expect((await jobOf(job.id)).attempts).toHaveLength(1);
  });

  it('UNKNOWN blocks retryJob with ATTEMPT_IN_FLIGHT until a result arrives', async () => {
    const job = await createSummarizeJob(api, owner.token, 'blocked-then-result');
    await timeOut(api, clock);
    for (const provider of [undefined, 'backup']) {
      expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id, provider }))).toBe('ATTEMPT_IN_FLIGHT');
    }
    const res = dataOf(await report(api, operator.token, job.attempts[0]!.id, { result: RESULT })).reportAttemptResult;
    expect(res).toMatchObject({ outcome: 'WON', job: { status: 'SUCCEEDED', version: 2 } });
    expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id }))).toBe('JOB_CLOSED');
  });

  it('an error reported for an UNKNOWN attempt is a definitive failure: FAILED, then the fallback', async () => {
    const job = await createSummarizeJob(api, owner.token, 'unknown-then-error');
    await timeOut(api, clock);
    const res = dataOf(await report(api, operator.token, job.attempts[0]!.id, { error: 'rejected: quota' })).reportAttemptResult;
    expect(res.outcome).toBe('FAILED');
    expect(res.job.attempts.map((a: { state: string }) => a.state)).toEqual(['FAILED', 'RUNNING']);
  });

  it('after an operator cancels it, 20 concurrent retryJob start exactly one new attempt', async () => {
    const job = await createSummarizeJob(api, owner.token, 'retry-storm');
    await timeOut(api, clock);
    expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id }))).toBe('ATTEMPT_IN_FLIGHT');
    const cancelled = await cancelAttemptOk(api, operator.token, job.attempts[0]!.id, 'provider status page says lost');
    expect(cancelled.state).toBe('CANCELLED');
    expect((await jobOf(job.id)).status).toBe('PENDING');

    const hold = await holdJob(db.pool, job.id);
    const retries = Array.from({ length: 20 }, () => gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id }));
    await waitForLockWaiters(db.pool, db.name, 20);
    await hold.release();
    const answers = await Promise.all(retries);
    const started = answers.filter((r) => r.data?.retryJob);
    expect(started).toHaveLength(1);
    expect(answers.filter((r) => r.errors?.[0]?.extensions?.code === 'ATTEMPT_IN_FLIGHT')).toHaveLength(19);
    expect(started[0]!.data.retryJob).toMatchObject({ number: 2, provider: 'primary', state: 'RUNNING', readVersion: 1 });
    const after = await jobOf(job.id);
    expect(after.attempts.map((a: { number: number; state: string }) => `${a.number}:${a.state}`)).toEqual(['1:CANCELLED', '2:RUNNING']);
    expect(after.version).toBe(1); // rule 15: timeouts, cancels and starts never move the version
  });
});

describe('a restarted instance', () => {
  it('turns attempts that went overdue while no instance ran UNKNOWN as soon as it starts sweeping', async () => {
    // An instance whose clock is an hour behind writes deadlines that have already passed in real time,
    // and it never sweeps: as if it died right after creating the job.
    const past = new ManualClock(Date.now() - 3_600_000);
    const dead = await startInstance(db.url, { clock: past, sweepDeadlines: false });
    const job = await createSummarizeJob(dead, owner.token, 'restart', { attemptTimeoutMs: 100 });
    await dead.stop();

    const started = Date.now();
    const fresh = await startInstance(db.url); // real clock, sweeping
    let state = '';
    while (state !== 'UNKNOWN') {
      if (Date.now() - started > 5_000) throw new Error(`still ${state} after 5 s`);
      state = (await db.pool.query('SELECT state FROM attempts WHERE id = $1', [job.attempts[0]!.id])).rows[0].state;
      if (state !== 'UNKNOWN') await new Promise((r) => setTimeout(r, 20)); // poll interval
    }
    await fresh.stop();
  });
});

describe('retryJob (rule 8)', () => {
  it('refuses a provider outside the job’s providers, and a closed job', async () => {
    const job = await createSummarizeJob(api, owner.token, 'retry-rules', { fallbackProviders: [] });
    await report(api, operator.token, job.attempts[0]!.id, { error: 'nope' });
    expect((await jobOf(job.id)).status).toBe('FAILED');
    expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id, provider: 'backup' }))).toBe('PROVIDER_NOT_ALLOWED');
    expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id, provider: 'nonexistent' }))).toBe('PROVIDER_NOT_ALLOWED');
    const second = await retryOk(api, owner.token, job.id);
    expect(second).toMatchObject({ number: 2, provider: 'primary' });
    await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: job.id });
    expect(errorCode(await gql(api.graphqlUrl, owner.token, RETRY_JOB, { jobId: job.id }))).toBe('JOB_CLOSED');
  });

  it('on an explicitly chosen fallback starts there, reading the current version', async () => {
    const job = await createSummarizeJob(api, owner.token, 'retry-fallback', { fallbackProviders: ['backup', 'spare'] });
    await timeOut(api, clock);
    await cancelAttemptOk(api, operator.token, job.attempts[0]!.id);
    expect(await retryOk(api, owner.token, job.id, 'spare')).toMatchObject({ number: 2, provider: 'spare', readVersion: 1 });
  });
});

describe('cancelAttempt', () => {
  it('refuses an attempt that is not live with ATTEMPT_NOT_LIVE and changes nothing', async () => {
    const job = await createSummarizeJob(api, owner.token, 'cancel-final');
    await report(api, operator.token, job.attempts[0]!.id, { result: RESULT });
    const before = await eventTypes(db.pool, job.id);
    const res = await gql(api.graphqlUrl, operator.token, CANCEL_ATTEMPT, { attemptId: job.attempts[0]!.id, reason: 'too late' });
    expect(errorCode(res)).toBe('ATTEMPT_NOT_LIVE');
    expect(await eventTypes(db.pool, job.id)).toEqual(before);
  });

  it('leaves the job row alone (rule 15) and a late result of the cancelled attempt may still win', async () => {
    const job = await createSummarizeJob(api, owner.token, 'cancel-live');
    await cancelAttemptOk(api, operator.token, job.attempts[0]!.id);
    expect(await jobOf(job.id)).toMatchObject({ status: 'PENDING', version: 1 });
    const late = dataOf(await report(api, operator.token, job.attempts[0]!.id, { result: RESULT })).reportAttemptResult;
    expect(late).toMatchObject({ outcome: 'WON', attempt: { state: 'SUCCEEDED' }, job: { status: 'SUCCEEDED', version: 2 } });
  });

  it('a late error for a cancelled attempt is recorded as FAILED and starts nothing', async () => {
    const job = await createSummarizeJob(api, owner.token, 'cancel-late-error');
    await cancelAttemptOk(api, operator.token, job.attempts[0]!.id);
    const res = dataOf(await report(api, operator.token, job.attempts[0]!.id, { error: 'timed out upstream' })).reportAttemptResult;
    expect(res.outcome).toBe('FAILED');
    expect(res.job.attempts).toHaveLength(1);
  });
});
