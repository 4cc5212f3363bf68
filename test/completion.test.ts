// Completion by compare-and-swap (rules 11–14): exactly one result wins, whatever order they arrive in.
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import { CANCEL_JOB, JOB, dataOf, gql } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { holdJob, waitForLockWaiters } from './helpers/holds.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';
import { cancelAttemptOk, createSummarizeJob, eventTypes, report, retryOk, timeOut } from './helpers/scenario.ts';

let db: TestDatabase;
let api: Instance;
let clock: ManualClock;
let owner: TestToken;
let operator: TestToken;

const RESULT_1 = { summary: 'Primary says: a fox.', keyPoints: ['primary'] };
const RESULT_2 = { summary: 'Fallback says: a fox.', keyPoints: ['fallback'] };

beforeAll(async () => {
  db = await createTestDatabase('completion');
  clock = new ManualClock();
  api = await startInstance(db.url, { clock, sweepDeadlines: false });
  owner = await makeToken(db.pool, 'owner');
  operator = await makeToken(db.pool, 'ops', 'operator');
});

/** Attempt 1 (primary) timed out and was cancelled by an operator; attempt 2 (fallback) is running. */
async function primaryLostFallbackRunning(key: string) {
  const job = await createSummarizeJob(api, owner.token, key);
  await timeOut(api, clock);
  const attempt1 = job.attempts[0]!.id;
  expect(dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job.attempts[0].state).toBe('UNKNOWN');
  await cancelAttemptOk(api, operator.token, attempt1);
  const attempt2 = await retryOk(api, owner.token, job.id, 'backup');
  expect(attempt2).toMatchObject({ number: 2, provider: 'backup', state: 'RUNNING', readVersion: 1 });
  return { jobId: job.id, attempt1, attempt2: attempt2.id };
}

async function raceLog(jobId: string) {
  const { rows } = await db.pool.query(
    'SELECT loser_attempt_id, winner_attempt_id, loser_read_version, job_version, payload FROM race_log WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

describe('reverse-order finish', () => {
  it('the fallback reports first and wins; the primary’s late result is DISCARDED, logged and streamed', async () => {
    const { jobId, attempt1, attempt2 } = await primaryLostFallbackRunning('reverse');
    const won = dataOf(await report(api, operator.token, attempt2, { result: RESULT_2 })).reportAttemptResult;
    expect(won).toMatchObject({ outcome: 'WON', attempt: { state: 'SUCCEEDED' }, job: { status: 'SUCCEEDED', version: 2, result: RESULT_2 } });

    const late = dataOf(await report(api, operator.token, attempt1, { result: RESULT_1 })).reportAttemptResult;
    expect(late.outcome).toBe('DISCARDED');
    expect(late.attempt.state).toBe('DISCARDED');
    expect(late.job).toMatchObject({ status: 'SUCCEEDED', version: 2, result: RESULT_2, completedBy: { id: attempt2 } });

    expect(await raceLog(jobId)).toEqual([
      { loser_attempt_id: attempt1, winner_attempt_id: attempt2, loser_read_version: 1, job_version: 2, payload: RESULT_1 },
    ]);
    const types = await eventTypes(db.pool, jobId);
    expect(types.slice(-3)).toEqual(['ATTEMPT_SUCCEEDED', 'JOB_SUCCEEDED', 'ATTEMPT_DISCARDED']);
    expect(types).toContain('ATTEMPT_UNKNOWN');
  });
});

describe('forward-order finish', () => {
  it('the cancelled primary’s late result still wins the swap; the fallback’s result is then DISCARDED', async () => {
    const { jobId, attempt1, attempt2 } = await primaryLostFallbackRunning('forward');
    const first = dataOf(await report(api, operator.token, attempt1, { result: RESULT_1 })).reportAttemptResult;
    expect(first).toMatchObject({ outcome: 'WON', attempt: { state: 'SUCCEEDED' }, job: { status: 'SUCCEEDED', version: 2, result: RESULT_1 } });
    const second = dataOf(await report(api, operator.token, attempt2, { result: RESULT_2 })).reportAttemptResult;
    expect(second).toMatchObject({ outcome: 'DISCARDED', job: { version: 2, result: RESULT_1, completedBy: { id: attempt1 } } });
    expect(await raceLog(jobId)).toMatchObject([{ loser_attempt_id: attempt2, winner_attempt_id: attempt1 }]);
  });
});

describe('two reports racing on separate connections', () => {
  it('exactly one WON, every time', async () => {
    for (let round = 0; round < 5; round++) {
      const { jobId, attempt1, attempt2 } = await primaryLostFallbackRunning(`racing-${round}`);
      // Both reports queue on the job's lock, held here; released together, the swap decides.
      const hold = await holdJob(db.pool, jobId);
      const reports = [report(api, operator.token, attempt1, { result: RESULT_1 }), report(api, operator.token, attempt2, { result: RESULT_2 })];
      await waitForLockWaiters(db.pool, db.name, 2);
      await hold.release();
      const outcomes = (await Promise.all(reports)).map((r) => dataOf(r).reportAttemptResult.outcome).sort();
      expect(outcomes).toEqual(['DISCARDED', 'WON']);
      const job = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: jobId })).job;
      expect(job.version).toBe(2);
      expect(job.result).toEqual(job.completedBy.id === attempt1 ? RESULT_1 : RESULT_2);
      expect(await raceLog(jobId)).toHaveLength(1);
    }
  });
});

describe('duplicate delivery (rule 13)', () => {
  it('a report delivered again answers the first outcome and changes nothing', async () => {
    const job = await createSummarizeJob(api, owner.token, 'dup');
    const attemptId = job.attempts[0]!.id;
    const first = dataOf(await report(api, operator.token, attemptId, { result: RESULT_1 })).reportAttemptResult;
    const eventsAfterFirst = await eventTypes(db.pool, job.id);
    const again = dataOf(await report(api, operator.token, attemptId, { result: RESULT_2 })).reportAttemptResult;
    expect(again).toMatchObject({ outcome: 'WON', job: { version: first.job.version, result: RESULT_1 } });
    expect(await eventTypes(db.pool, job.id)).toEqual(eventsAfterFirst);
    expect(await raceLog(job.id)).toEqual([]);
  });

  it('ten identical deliveries at once: one change, ten WON answers', async () => {
    const job = await createSummarizeJob(api, owner.token, 'dup-storm');
    const attemptId = job.attempts[0]!.id;
    const hold = await holdJob(db.pool, job.id);
    const deliveries = Array.from({ length: 10 }, () => report(api, operator.token, attemptId, { result: RESULT_1 }));
    await waitForLockWaiters(db.pool, db.name, 10);
    await hold.release();
    const outcomes = (await Promise.all(deliveries)).map((r) => dataOf(r).reportAttemptResult.outcome);
    expect(outcomes).toEqual(Array(10).fill('WON'));
    const types = await eventTypes(db.pool, job.id);
    expect(types.filter((t) => t === 'ATTEMPT_SUCCEEDED')).toHaveLength(1);
    expect(dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job.version).toBe(2);
  });

  it('a failure delivered twice starts the fallback once', async () => {
    const job = await createSummarizeJob(api, owner.token, 'dup-failure');
    const attemptId = job.attempts[0]!.id;
    for (let i = 0; i < 2; i++) {
      expect(dataOf(await report(api, operator.token, attemptId, { error: 'provider said no' })).reportAttemptResult.outcome).toBe('FAILED');
    }
    const after = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job;
    expect(after.attempts.map((a: { provider: string; state: string }) => `${a.provider}:${a.state}`)).toEqual([
      'primary:FAILED',
      'backup:RUNNING',
    ]);
  });
});

describe('the output contract is checked on every result (rule 10)', () => {
  it('an extra top-level key fails the attempt and the fallback starts by itself', async () => {
    const job = await createSummarizeJob(api, owner.token, 'extra-key');
    const res = dataOf(await report(api, operator.token, job.attempts[0]!.id, { result: { ...RESULT_1, confidence: 0.9 } })).reportAttemptResult;
    expect(res.outcome).toBe('FAILED');
    expect(res.job).toMatchObject({ status: 'RUNNING', version: 1, result: null });
    expect(res.job.attempts.map((a: { provider: string; state: string }) => [a.provider, a.state])).toEqual([
      ['primary', 'FAILED'],
      ['backup', 'RUNNING'],
    ]);
    const attempt = dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: job.id })).job.attempts[0];
    expect(attempt.error).toMatch(/confidence/);
    expect(await eventTypes(db.pool, job.id)).toEqual([
      'JOB_CREATED', 'ATTEMPT_STARTED', 'ATTEMPT_RUNNING', 'ATTEMPT_FAILED', 'ATTEMPT_STARTED', 'ATTEMPT_RUNNING',
    ]);
  });

  it('a label not among the input’s labels fails; with no fallback left the job is FAILED', async () => {
    const created = await gql(api.graphqlUrl, owner.token, `mutation($i: CreateJobInput!) { createJob(input: $i) { job { id attempts { id } } } }`, {
      i: { idempotencyKey: 'bad-label', operation: 'classify', provider: 'primary', input: { text: 'I love it', labels: ['positive', 'negative'] } },
    });
    const job = dataOf(created).createJob.job;
    const res = dataOf(await report(api, operator.token, job.attempts[0].id, { result: { label: 'neutral', confidence: 0.7 } })).reportAttemptResult;
    expect(res.outcome).toBe('FAILED');
    expect(res.job).toMatchObject({ status: 'FAILED', version: 1, result: null });
    expect((await eventTypes(db.pool, job.id)).slice(-2)).toEqual(['ATTEMPT_FAILED', 'JOB_FAILED']);
    // FAILED is not closed: a retry starts attempt 2 on the primary.
    const retry = await retryOk(api, owner.token, job.id);
    expect(retry).toMatchObject({ number: 2, provider: 'primary', state: 'RUNNING' });
  });

  it('a summary not shorter than the text breaks the business rule', async () => {
    const job = await createSummarizeJob(api, owner.token, 'long-summary', { input: { text: 'Short.' }, fallbackProviders: [] });
    const res = dataOf(await report(api, operator.token, job.attempts[0]!.id, { result: { summary: 'Short, but longer.', keyPoints: ['x'] } }));
    expect(res.reportAttemptResult.outcome).toBe('FAILED');
    expect(res.reportAttemptResult.job.status).toBe('FAILED');
  });
});

describe('cancelJob (rule 14)', () => {
  it('cancels the live attempt, bumps the version, and a late result is DISCARDED', async () => {
    const job = await createSummarizeJob(api, owner.token, 'cancel-then-late');
    const cancelled = dataOf(await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: job.id })).cancelJob;
    expect(cancelled).toMatchObject({ status: 'CANCELLED', version: 2, attempts: [{ state: 'CANCELLED' }] });
    const late = dataOf(await report(api, operator.token, job.attempts[0]!.id, { result: RESULT_1 })).reportAttemptResult;
    expect(late).toMatchObject({ outcome: 'DISCARDED', job: { status: 'CANCELLED', version: 2, result: null } });
    expect(await raceLog(job.id)).toMatchObject([{ winner_attempt_id: null, loser_read_version: 1, job_version: 2 }]);
    expect((await eventTypes(db.pool, job.id)).slice(-3)).toEqual(['ATTEMPT_CANCELLED', 'JOB_CANCELLED', 'ATTEMPT_DISCARDED']);
  });

  it('cancelling again answers the job unchanged; a SUCCEEDED job cannot be cancelled', async () => {
    const job = await createSummarizeJob(api, owner.token, 'cancel-twice');
    await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: job.id });
    const again = dataOf(await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: job.id })).cancelJob;
    expect(again).toMatchObject({ status: 'CANCELLED', version: 2 });
    const done = await createSummarizeJob(api, owner.token, 'cancel-succeeded');
    await report(api, operator.token, done.attempts[0]!.id, { result: RESULT_1 });
    const refused = await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: done.id });
    expect(refused.errors?.[0]?.extensions?.code).toBe('JOB_CLOSED');
  });
});
