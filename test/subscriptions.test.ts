// jobEvents (contract §3, rule 16): every stored event after afterSeq, then live ones, in seq order with no
// gap and no duplicate, on any instance. Changes are made on instance A, subscribers read on instance B.
import type { Client } from 'graphql-ws';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import {
  CANCEL_ATTEMPT,
  CANCEL_JOB,
  CREATE_JOB,
  GOOD_SUMMARY,
  REPORT,
  RETRY_JOB,
  dataOf,
  errorCode,
  gql,
  summarizeInput,
  wsClient,
} from './helpers/graphql.ts';
import { holdLock, waitForLockWaiters } from './helpers/holds.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';
import { startPgProxy } from './helpers/pgProxy.ts';
import {
  JOB_EVENTS,
  subscribeSse,
  subscribeWs,
  waitFor,
  wsClientForTest,
  type EventStream,
  type JobEventMessage,
} from './helpers/subscriptions.ts';

/**
 * A live event (a change committed after the subscriber caught up) must arrive by its notification,
 * not by the hub's 5 s safety poll: waits for live events are bounded well below that.
 */
const LIVE_MS = 3_000;

let db: TestDatabase;
let a: Instance;
let b: Instance;
let alice: TestToken;
let bob: TestToken;
let operator: TestToken;
let aliceOnB: Client;
let bobOnB: Client;
let operatorOnB: Client;

beforeAll(async () => {
  db = await createTestDatabase('subscriptions');
  a = await startInstance(db.url);
  b = await startInstance(db.url);
  alice = await makeToken(db.pool, 'alice');
  bob = await makeToken(db.pool, 'bob');
  operator = await makeToken(db.pool, 'ops', 'operator');
  aliceOnB = wsClient(b.graphqlUrl, alice.token);
  bobOnB = wsClient(b.graphqlUrl, bob.token);
  operatorOnB = wsClient(b.graphqlUrl, operator.token);
});

// Changes, all made on instance A.
async function createJob(key: string, extra: Record<string, unknown> = {}) {
  const job = dataOf(await gql(a.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput(key, extra) })).createJob.job;
  return { jobId: job.id as string, attempt1: job.attempts[0].id as string };
}
const cancelAttempt = async (attemptId: string) =>
  dataOf(await gql(a.graphqlUrl, operator.token, CANCEL_ATTEMPT, { attemptId, reason: 'test' })).cancelAttempt;
const retryJob = async (jobId: string, provider?: string) =>
  dataOf(await gql(a.graphqlUrl, alice.token, RETRY_JOB, { jobId, provider })).retryJob as { id: string; number: number };
const report = async (attemptId: string, outcome: { result?: unknown; error?: string }) =>
  dataOf(await gql(a.graphqlUrl, operator.token, REPORT, { attemptId, ...outcome })).reportAttemptResult;
const cancelJob = async (jobId: string) => dataOf(await gql(a.graphqlUrl, alice.token, CANCEL_JOB, { jobId })).cancelJob;

/** The job's stored events, shaped as the subscription sends them. */
async function storedEvents(jobId: string): Promise<JobEventMessage[]> {
  const { rows } = await db.pool.query('SELECT * FROM job_events WHERE job_id = $1 ORDER BY seq', [jobId]);
  return rows.map((r) => ({
    seq: r.seq,
    type: r.type,
    jobId: r.job_id,
    jobStatus: r.job_status,
    attemptId: r.attempt_id,
    attemptNumber: r.attempt_number,
    attemptState: r.attempt_state,
    provider: r.provider,
    message: r.message,
    at: r.at.toISOString(),
  }));
}

/** [seq, type, jobStatus, attemptNumber, attemptState] of each event. */
const summary = (events: JobEventMessage[]) => events.map((e) => [e.seq, e.type, e.jobStatus, e.attemptNumber, e.attemptState]);

/** Stops the stream and checks it received exactly the job's stored events after its afterSeq, nothing else. */
async function expectExactly(stream: EventStream, jobId: string): Promise<void> {
  await stream.stop();
  expect(stream.violations).toEqual([]);
  expect(stream.errors).toEqual([]);
  expect(stream.events).toEqual((await storedEvents(jobId)).filter((e) => e.seq > stream.afterSeq));
}

describe('jobEvents over graphql-ws, changes on another instance', () => {
  it('delivers every change made on A to a subscriber on B, in seq order, with type, status and attempt', async () => {
    const { jobId, attempt1 } = await createJob('ws-every-change');
    const s = subscribeWs(aliceOnB, jobId);
    await s.untilSeq(3);

    await cancelAttempt(attempt1);
    await s.untilSeq(4, LIVE_MS);
    const attempt2 = await retryJob(jobId);
    await s.untilSeq(6, LIVE_MS);
    // A definitive failure of attempt 2 starts attempt 3 on the manual fallback by itself.
    expect((await report(attempt2.id, { error: 'provider said no' })).outcome).toBe('FAILED');
    await s.untilSeq(9, LIVE_MS);
    const attempt3 = s.events.at(-1)!.attemptId!;
    expect((await report(attempt3, { result: GOOD_SUMMARY })).outcome).toBe('WON');
    await s.untilSeq(11, LIVE_MS);
    // Attempt 1 was cancelled out of band; its late result loses to attempt 3's.
    expect((await report(attempt1, { result: GOOD_SUMMARY })).outcome).toBe('DISCARDED');
    await s.untilSeq(12, LIVE_MS);

    expect(summary(s.events)).toEqual([
      [1, 'JOB_CREATED', 'RUNNING', null, null],
      [2, 'ATTEMPT_STARTED', 'RUNNING', 1, 'STARTING'],
      [3, 'ATTEMPT_RUNNING', 'RUNNING', 1, 'RUNNING'],
      [4, 'ATTEMPT_CANCELLED', 'PENDING', 1, 'CANCELLED'],
      [5, 'ATTEMPT_STARTED', 'RUNNING', 2, 'STARTING'],
      [6, 'ATTEMPT_RUNNING', 'RUNNING', 2, 'RUNNING'],
      [7, 'ATTEMPT_FAILED', 'RUNNING', 2, 'FAILED'],
      [8, 'ATTEMPT_STARTED', 'RUNNING', 3, 'STARTING'],
      [9, 'ATTEMPT_RUNNING', 'RUNNING', 3, 'RUNNING'],
      [10, 'ATTEMPT_SUCCEEDED', 'SUCCEEDED', 3, 'SUCCEEDED'],
      [11, 'JOB_SUCCEEDED', 'SUCCEEDED', 3, 'SUCCEEDED'],
      [12, 'ATTEMPT_DISCARDED', 'SUCCEEDED', 1, 'DISCARDED'],
    ]);
    expect(s.events.every((e) => e.jobId === jobId)).toBe(true);
    expect(s.events[7]!.provider).toBe('backup');
    expect(s.events[11]!.attemptId).toBe(attempt1);
    await expectExactly(s, jobId);
  });

  it('cancelJob, a refused retry and a late result: CANCELLED, no event for the refusal, then DISCARDED', async () => {
    const { jobId, attempt1 } = await createJob('ws-cancel-job');
    const s = subscribeWs(aliceOnB, jobId);
    await s.untilSeq(3);
    expect((await cancelJob(jobId)).status).toBe('CANCELLED');
    await s.untilSeq(5, LIVE_MS);
    const refused = await gql(a.graphqlUrl, alice.token, RETRY_JOB, { jobId });
    expect(errorCode(refused)).toBe('JOB_CLOSED');
    expect((await report(attempt1, { result: GOOD_SUMMARY })).outcome).toBe('DISCARDED');
    await s.untilSeq(6, LIVE_MS);
    expect(summary(s.events)).toEqual([
      [1, 'JOB_CREATED', 'RUNNING', null, null],
      [2, 'ATTEMPT_STARTED', 'RUNNING', 1, 'STARTING'],
      [3, 'ATTEMPT_RUNNING', 'RUNNING', 1, 'RUNNING'],
      [4, 'ATTEMPT_CANCELLED', 'CANCELLED', 1, 'CANCELLED'],
      [5, 'JOB_CANCELLED', 'CANCELLED', null, null],
      [6, 'ATTEMPT_DISCARDED', 'CANCELLED', 1, 'DISCARDED'],
    ]);
    await expectExactly(s, jobId);
  });

  it('resumes: afterSeq = N sends exactly the stored events after N, then live ones', async () => {
    const { jobId, attempt1 } = await createJob('ws-resume');
    await cancelAttempt(attempt1);
    const attempt2 = await retryJob(jobId); // 6 events stored
    expect((await storedEvents(jobId)).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);

    const midway = subscribeWs(aliceOnB, jobId, 2, 'afterSeq 2');
    const atEnd = subscribeWs(aliceOnB, jobId, 6, 'afterSeq 6');
    const fromStart = subscribeWs(aliceOnB, jobId, 0, 'afterSeq 0');
    await midway.untilSeq(6);
    await fromStart.untilSeq(6);
    expect(midway.seqs).toEqual([3, 4, 5, 6]);
    expect(atEnd.events).toEqual([]);

    expect((await report(attempt2.id, { result: GOOD_SUMMARY })).outcome).toBe('WON');
    for (const s of [midway, atEnd, fromStart]) await s.untilSeq(8, LIVE_MS);
    expect(atEnd.seqs).toEqual([7, 8]);
    expect(summary(atEnd.events)).toEqual([
      [7, 'ATTEMPT_SUCCEEDED', 'SUCCEEDED', 2, 'SUCCEEDED'],
      [8, 'JOB_SUCCEEDED', 'SUCCEEDED', 2, 'SUCCEEDED'],
    ]);
    for (const s of [midway, atEnd, fromStart]) await expectExactly(s, jobId);
  });

  it('a subscriber that arrives while a read for the job is in flight is still served from its own afterSeq', async () => {
    const { jobId, attempt1 } = await createJob('ws-in-flight');
    const before = b.app.hub.subscriberCount();
    // Reads of job_events wait on this lock: the first subscriber's read stays in flight.
    const hold = await holdLock(db.pool, 'LOCK TABLE job_events IN ACCESS EXCLUSIVE MODE');
    let late: EventStream;
    let early: EventStream;
    try {
      late = subscribeWs(aliceOnB, jobId, 3, 'afterSeq 3');
      await waitForLockWaiters(db.pool, db.name, 1);
      early = subscribeWs(aliceOnB, jobId, 0, 'afterSeq 0'); // behind the read that is in flight
      await waitFor(async () => b.app.hub.subscriberCount() === before + 2, 'both subscribers registered on B');
    } finally {
      await hold.release();
    }
    await early.untilSeq(3, 1_500); // read again at once for it, not at the next safety poll
    expect(late.events).toEqual([]);
    await cancelAttempt(attempt1);
    await late.untilSeq(4, LIVE_MS);
    await early.untilSeq(4, LIVE_MS);
    await expectExactly(early, jobId);
    await expectExactly(late, jobId);
  });

  it('UNKNOWN and DISCARDED are delivered like any other event', async () => {
    // Attempts of this job time out after 100 ms; A's deadline sweep (every 200 ms) makes them UNKNOWN.
    const { jobId, attempt1 } = await createJob('ws-unknown', { attemptTimeoutMs: 100 });
    const s = subscribeWs(aliceOnB, jobId);
    await s.until((events) => events.some((e) => e.type === 'ATTEMPT_UNKNOWN' && e.attemptId === attempt1), 'attempt 1 UNKNOWN');

    await cancelAttempt(attempt1);
    const attempt2 = await retryJob(jobId);
    expect(attempt2.number).toBe(2);
    // Attempt 2 has the same 100 ms deadline: wait for it to go UNKNOWN too, so the order is fixed.
    await s.until((events) => events.some((e) => e.type === 'ATTEMPT_UNKNOWN' && e.attemptId === attempt2.id), 'attempt 2 UNKNOWN');
    expect((await report(attempt2.id, { result: GOOD_SUMMARY })).outcome).toBe('WON');
    expect((await report(attempt1, { result: GOOD_SUMMARY })).outcome).toBe('DISCARDED');
    await s.untilSeq(11);

    expect(summary(s.events)).toEqual([
      [1, 'JOB_CREATED', 'RUNNING', null, null],
      [2, 'ATTEMPT_STARTED', 'RUNNING', 1, 'STARTING'],
      [3, 'ATTEMPT_RUNNING', 'RUNNING', 1, 'RUNNING'],
      [4, 'ATTEMPT_UNKNOWN', 'UNKNOWN', 1, 'UNKNOWN'],
      [5, 'ATTEMPT_CANCELLED', 'PENDING', 1, 'CANCELLED'],
      [6, 'ATTEMPT_STARTED', 'RUNNING', 2, 'STARTING'],
      [7, 'ATTEMPT_RUNNING', 'RUNNING', 2, 'RUNNING'],
      [8, 'ATTEMPT_UNKNOWN', 'UNKNOWN', 2, 'UNKNOWN'],
      [9, 'ATTEMPT_SUCCEEDED', 'SUCCEEDED', 2, 'SUCCEEDED'],
      [10, 'JOB_SUCCEEDED', 'SUCCEEDED', 2, 'SUCCEEDED'],
      [11, 'ATTEMPT_DISCARDED', 'SUCCEEDED', 1, 'DISCARDED'],
    ]);
    await expectExactly(s, jobId);
  });

  it('100 concurrent subscribers on B, some resuming midway, while A changes the job: each gets exactly its sequence', async () => {
    const { jobId, attempt1 } = await createJob('ws-fan-out');
    await cancelAttempt(attempt1);
    const attempt2 = await retryJob(jobId); // 6 events stored before anyone subscribes
    const clients = Array.from({ length: 10 }, () => wsClientForTest(b.graphqlUrl, alice.token));
    const streams: EventStream[] = [];
    const subscribe = (from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const afterSeq = i % 2 === 0 ? 0 : i % 7; // half from the start, the rest resuming at 1..6
        streams.push(subscribeWs(clients[i % clients.length]!, jobId, afterSeq, `subscriber ${i} (afterSeq ${afterSeq})`));
      }
    };

    // Subscriptions are being set up while the changes commit on A.
    subscribe(0, 50);
    expect((await report(attempt2.id, { error: 'provider said no' })).outcome).toBe('FAILED'); // 7, 8, 9: attempt 3 on backup
    const attempt3 = (await storedEvents(jobId)).at(-1)!.attemptId!;
    subscribe(50, 80);
    await cancelAttempt(attempt3); // 10
    const attempt4 = await retryJob(jobId); // 11, 12
    subscribe(80, 100);
    expect((await report(attempt4.id, { result: GOOD_SUMMARY })).outcome).toBe('WON'); // 13, 14
    expect((await report(attempt1, { result: GOOD_SUMMARY })).outcome).toBe('DISCARDED'); // 15
    expect((await report(attempt3, { result: GOOD_SUMMARY })).outcome).toBe('DISCARDED'); // 16

    const stored = await storedEvents(jobId);
    expect(stored).toHaveLength(16);
    await Promise.all(streams.map((s) => s.untilSeq(16)));
    expect(b.app.hub.subscriberCount()).toBeGreaterThanOrEqual(100);
    await Promise.all(streams.map((s) => s.stop()));
    for (const s of streams) {
      expect(s.violations, s.label).toEqual([]);
      expect(s.errors, s.label).toEqual([]);
      expect(s.events, s.label).toEqual(stored.filter((e) => e.seq > s.afterSeq));
    }
    await waitFor(async () => b.app.hub.subscriberCount() === 0, 'the hub to drop the stopped subscribers');
  });
});

describe('jobEvents over server-sent events', () => {
  it('POST with Accept: text/event-stream (and GET) sends the stored events, then a live one', async () => {
    const { jobId, attempt1 } = await createJob('sse');
    await cancelAttempt(attempt1); // 4 stored
    const post = subscribeSse(b.graphqlUrl, alice.token, jobId);
    const get = subscribeSse(b.graphqlUrl, alice.token, jobId, { afterSeq: 1, method: 'GET' });
    await post.untilSeq(4);
    await get.untilSeq(4);
    expect(post.seqs).toEqual([1, 2, 3, 4]);
    expect(get.seqs).toEqual([2, 3, 4]);

    await retryJob(jobId); // live: 5, 6
    await post.untilSeq(6, LIVE_MS);
    await get.untilSeq(6, LIVE_MS);
    expect(summary(post.events.slice(4))).toEqual([
      [5, 'ATTEMPT_STARTED', 'RUNNING', 2, 'STARTING'],
      [6, 'ATTEMPT_RUNNING', 'RUNNING', 2, 'RUNNING'],
    ]);
    await expectExactly(post, jobId);
    await expectExactly(get, jobId);
  });

  it('another owner gets NOT_FOUND over SSE too, and no token UNAUTHENTICATED', async () => {
    const { jobId } = await createJob('sse-access');
    const other = subscribeSse(b.graphqlUrl, bob.token, jobId, { label: 'bob over sse' });
    expect((await other.untilError()).extensions?.code).toBe('NOT_FOUND');
    expect(other.events).toEqual([]);
    const res = await fetch(b.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: JOB_EVENTS, variables: { jobId } }),
    });
    expect(await res.text()).toContain('UNAUTHENTICATED');
  });
});

describe('who may subscribe', () => {
  it('another owner gets NOT_FOUND, like an id that does not exist; an operator may subscribe', async () => {
    const { jobId } = await createJob('ws-access');
    const bobs = subscribeWs(bobOnB, jobId, undefined, 'bob');
    const err = await bobs.untilError();
    expect(err.extensions?.code).toBe('NOT_FOUND');
    expect(bobs.events).toEqual([]);
    const missing = subscribeWs(aliceOnB, '00000000-0000-4000-8000-000000000000', undefined, 'missing job');
    expect((await missing.untilError()).extensions?.code).toBe('NOT_FOUND');
    const malformed = subscribeWs(aliceOnB, 'not-a-uuid', undefined, 'malformed id');
    expect((await malformed.untilError()).extensions?.code).toBe('NOT_FOUND');

    const ops = subscribeWs(operatorOnB, jobId, undefined, 'operator');
    await ops.untilSeq(3);
    await cancelJob(jobId);
    await ops.untilSeq(5, LIVE_MS);
    await expectExactly(ops, jobId);
  });
});

describe('a missed notification cannot lose an event', () => {
  const LISTENER = 'onejob-listener';
  const listeners = async () =>
    (
      await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
        [db.name, LISTENER],
      )
    ).rows[0]!.n;

  it('an event committed while the LISTEN connections are dead still reaches the subscriber', async () => {
    const { jobId, attempt1 } = await createJob('missed-notification');
    const s = subscribeWs(aliceOnB, jobId);
    await s.untilSeq(3);
    expect(await listeners()).toBe(2); // A's and B's

    // Kill every listener of this database, then commit a change on A. The listeners come back
    // after a delay; the change counts only if it committed while none was there (checked after it
    // returned), so try again until one did.
    let missedSeq: number | undefined;
    let attempt = attempt1;
    for (let round = 0; round < 5 && missedSeq === undefined; round++) {
      await db.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`, [
        db.name,
        LISTENER,
      ]);
      await waitFor(async () => (await listeners()) === 0, 'the listeners to be gone');
      await cancelAttempt(attempt);
      const committed = (await storedEvents(jobId)).at(-1)!.seq;
      if ((await listeners()) === 0) missedSeq = committed;
      else attempt = (await retryJob(jobId)).id; // the listener was back too soon: another round
    }
    expect(missedSeq, 'no change committed while the listeners were down').toBeDefined();

    await s.untilSeq(missedSeq!);
    // The listener is back and live events flow through it again, well before the safety poll.
    await waitFor(async () => (await listeners()) === 2, 'both listeners to reconnect');
    await retryJob(jobId);
    await s.untilSeq(missedSeq! + 2, LIVE_MS);
    await expectExactly(s, jobId);
  });

  it('while the database is unreachable the listener retries one connection at a time, then catches up', async () => {
    const proxy = await startPgProxy(db.url);
    const c = await startInstance(proxy.url);
    const client = wsClientForTest(c.graphqlUrl, alice.token);
    const { jobId, attempt1 } = await createJob('listener-outage');
    const s = subscribeWs(client, jobId);
    await s.untilSeq(3);
    expect(proxy.open(LISTENER)).toBe(1);

    proxy.refusing = true;
    expect(proxy.drop(LISTENER)).toBe(1);
    await cancelAttempt(attempt1); // committed on A while C has no listener: C is not notified
    const attempts = () => proxy.refused.filter((r) => r.applicationName === LISTENER);
    await waitFor(async () => attempts().length >= 4, '4 refused reconnects of the listener');
    // One reconnect loop, spaced by its delay: never two attempts at once (a loop that forks on every
    // failure doubles its attempts, and its connections once the database is back).
    const times = attempts().map((r) => r.at);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(Math.min(...gaps), `gaps between reconnects: ${gaps.join(', ')} ms`).toBeGreaterThanOrEqual(250);

    proxy.refusing = false;
    await s.untilSeq(4);
    await waitFor(async () => proxy.open(LISTENER) === 1, 'the listener to reconnect');
    const connected = proxy.accepted.filter((r) => r.applicationName === LISTENER).length;
    await retryJob(jobId); // live through the new listener
    await s.untilSeq(6, LIVE_MS);
    expect(proxy.accepted.filter((r) => r.applicationName === LISTENER).length).toBe(connected);
    expect(proxy.open(LISTENER)).toBe(1);
    await expectExactly(s, jobId);
    await c.stop();
  });
});

