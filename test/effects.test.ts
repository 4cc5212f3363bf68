// Outcome effects (CONTRACT.md section 8): the usage ledger (one debit per SUCCEEDED job) and signed
// callback notifications (one per job and outcome), independent of each other. Real Postgres, real
// onejob instances, a real HTTP receiver that verifies signatures with standardwebhooks.
import { Webhook } from 'standardwebhooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import { Config } from '../config.ts';
import { backoffDelayMs, CallbackDeliveryWorker, type CallbackDeliveryTuning } from '../core/callbackDelivery.ts';
import { settleAttempt } from '../core/settleAttempt.ts';
import { closedPort } from './helpers/adapterCalls.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { CANCEL_JOB, JOB, dataOf, errorCode, gql } from './helpers/graphql.ts';
import { makeToken, startInstance, TEST_CONFIG, type Instance, type TestToken } from './helpers/instance.ts';
import { createSummarizeJob, report, retryOk } from './helpers/scenario.ts';
import { waitUntil } from './helpers/waitFor.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhookReceiver.ts';

const CONFIG: Config = Config.parse({
  providers: { ...TEST_CONFIG.providers, sim: { kind: 'sim', latencyMs: 0, timeoutMs: 30_000 } },
});

/** Short backoff and a fast poll, so that retries take milliseconds, not seconds. */
const FAST: Partial<CallbackDeliveryTuning> = { pollIntervalMs: 20, backoffBaseMs: 50, backoffCapMs: 200, requestTimeoutMs: 2_000 };

const SET_CALLBACK = /* GraphQL */ `mutation SetCallback($url: String!) { setCallback(url: $url) { url secret updatedAt } }`;
const CALLBACK = /* GraphQL */ `query { callback { url secret updatedAt } }`;
const USAGE = /* GraphQL */ `query Usage($first: Int) { usage(first: $first) { total entries { jobId effectKey units at } } }`;

const RESULT = { summary: 'A fox jumps.', keyPoints: ['fox', 'dog'] };

let db: TestDatabase;
let api: Instance;
let receiver: WebhookReceiver;
let operator: TestToken;

const startEffectsInstance = () => startInstance(db.url, { config: CONFIG, sweepDeadlines: false, callbackDelivery: FAST });

beforeAll(async () => {
  db = await createTestDatabase('effects');
  receiver = await startWebhookReceiver();
  api = await startEffectsInstance();
  operator = await makeToken(db.pool, 'effects-ops', 'operator');
});

/** A new owner with a callback at `path` whose secret the receiver verifies with. */
async function ownerWithCallback(name: string, path: string, script: { failFirst?: number; onRequest?: Parameters<WebhookReceiver['script']>[1]['onRequest'] } = {}) {
  const owner = await makeToken(db.pool, name);
  const set = dataOf(await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url: `${receiver.url}${path}` })).setCallback;
  receiver.script(path, { secret: set.secret, ...script });
  return { ...owner, secret: set.secret as string };
}

async function outboxOf(jobId: string) {
  const { rows } = await db.pool.query('SELECT * FROM callback_outbox WHERE job_id = $1 ORDER BY created_at, effect_key', [jobId]);
  return rows;
}

async function ledgerOf(jobId: string) {
  const { rows } = await db.pool.query('SELECT * FROM usage_ledger WHERE job_id = $1', [jobId]);
  return rows;
}

/** Waits until the notification with this key was delivered (a 2xx recorded). */
function delivered(effectKey: string, timeoutMs = 10_000) {
  return waitUntil(
    async () => (await db.pool.query('SELECT * FROM callback_outbox WHERE effect_key = $1 AND delivered_at IS NOT NULL', [effectKey])).rows[0],
    `delivery of ${effectKey}`,
    timeoutMs,
  );
}

async function succeed(attemptId: string) {
  return dataOf(await report(api, operator.token, attemptId, { result: RESULT })).reportAttemptResult;
}

describe('a job that succeeds', () => {
  it('debits once (1 unit for a manual report) and sends one signed job.succeeded callback with the documented body and headers', async () => {
    const owner = await ownerWithCallback('succeeds', '/succeeds');
    const job = await createSummarizeJob(api, owner.token, 'ok-1');
    const before = Date.now();
    expect(await succeed(job.attempts[0]!.id)).toMatchObject({ outcome: 'WON', job: { status: 'SUCCEEDED', version: 2 } });

    const key = `job:${job.id}:succeeded`;
    await delivered(key);
    const got = receiver.at('/succeeds');
    expect(got).toHaveLength(1);
    const [msg] = got;
    expect(msg!.verified).toBe(true);
    expect(msg!.status).toBe(204);
    expect(msg!.headers['webhook-id']).toBe(key);
    expect(msg!.headers['idempotency-key']).toBe(key);
    expect(msg!.headers['content-type']).toBe('application/json');
    const ts = Number(msg!.headers['webhook-timestamp']) * 1000;
    expect(ts).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(ts).toBeLessThanOrEqual(Date.now());
    expect(msg!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    expect(JSON.parse(msg!.body)).toEqual({
      type: 'job.succeeded',
      jobId: job.id,
      idempotencyKey: 'ok-1',
      status: 'SUCCEEDED',
      version: 2,
      result: RESULT,
    });
    // The body is verified as sent (standardwebhooks parses it on success).
    expect(new Webhook(owner.secret).verify(msg!.body, msg!.headers)).toEqual(JSON.parse(msg!.body));

    const usage = dataOf(await gql(api.graphqlUrl, owner.token, USAGE)).usage;
    expect(usage.total).toBe(1);
    expect(usage.entries).toEqual([{ jobId: job.id, effectKey: `job:${job.id}:charge`, units: 1, at: expect.any(String) }]);
  });

  it('duplicate reports neither debit nor notify twice', async () => {
    const owner = await ownerWithCallback('duplicates', '/duplicates');
    const job = await createSummarizeJob(api, owner.token, 'dup-1');
    const attemptId = job.attempts[0]!.id;
    await succeed(attemptId);
    await delivered(`job:${job.id}:succeeded`);
    for (let i = 0; i < 3; i++) expect((await succeed(attemptId)).outcome).toBe('WON');
    // Ten more at once, on separate connections.
    await Promise.all(Array.from({ length: 10 }, () => succeed(attemptId)));
    expect(await ledgerOf(job.id)).toHaveLength(1);
    expect((await outboxOf(job.id)).map((r) => r.effect_key)).toEqual([`job:${job.id}:succeeded`]);
    expect(receiver.at('/duplicates')).toHaveLength(1);
    expect(dataOf(await gql(api.graphqlUrl, owner.token, USAGE)).usage.total).toBe(1);
  });

  it('units are the winning attempt’s reported token count: a simulated provider’s 42, a reconciled 1234; a reported 0 debits 1', async () => {
    const owner = await makeToken(db.pool, 'tokens');
    // The sim provider is dispatched by the runner, which settles with the usage it reports (42).
    const simJob = await createSummarizeJob(api, owner.token, 'sim-1', { provider: 'sim', fallbackProviders: [] });
    await waitUntil(
      async () => dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: simJob.id })).job.status === 'SUCCEEDED',
      'the sim job to succeed',
    );
    // Settled as the reconciler and webhooks do, with the provider's usage.
    const counted = await createSummarizeJob(api, owner.token, 'counted-1');
    await settleAttempt(api.app.core, counted.attempts[0]!.id, { result: RESULT }, 'test', { usageTokens: 1234 });
    const zero = await createSummarizeJob(api, owner.token, 'zero-1');
    await settleAttempt(api.app.core, zero.attempts[0]!.id, { result: RESULT }, 'test', { usageTokens: 0 });

    const usage = dataOf(await gql(api.graphqlUrl, owner.token, USAGE)).usage;
    expect(usage.total).toBe(42 + 1234 + 1);
    // Newest first.
    expect(usage.entries.map((e: { jobId: string; units: number }) => [e.jobId, e.units])).toEqual([
      [zero.id, 1],
      [counted.id, 1234],
      [simJob.id, 42],
    ]);
    const [row] = await ledgerOf(counted.id);
    expect(row).toMatchObject({ effect_key: `job:${counted.id}:charge`, owner_id: owner.caller.ownerId, attempt_id: counted.attempts[0]!.id, units: 1234 });
    // An owner with no callback gets debits and no outbox rows.
    expect(await outboxOf(counted.id)).toEqual([]);
  });

  it('the ledger is history: it refuses updates and deletes', async () => {
    const owner = await makeToken(db.pool, 'history');
    const job = await createSummarizeJob(api, owner.token, 'history-1');
    await succeed(job.attempts[0]!.id);
    await expect(db.pool.query('DELETE FROM usage_ledger WHERE job_id = $1', [job.id])).rejects.toThrow(/append-only/);
    await expect(db.pool.query('UPDATE usage_ledger SET units = 5 WHERE job_id = $1', [job.id])).rejects.toThrow(/append-only/);
  });
});

describe('a callback URL that is down', () => {
  it('answering 500 three times: retried alone, with the same webhook-id and body, until a 2xx; exactly one debit, made before the first try', async () => {
    let jobId = '';
    const owner = await ownerWithCallback('down', '/down', {
      failFirst: 3,
      // At each request, what the ledger says at that moment.
      onRequest: async () => (await db.pool.query('SELECT count(*)::int AS n FROM usage_ledger WHERE job_id = $1', [jobId])).rows[0].n,
    });
    const job = await createSummarizeJob(api, owner.token, 'down-1');
    jobId = job.id;
    await succeed(job.attempts[0]!.id);
    const key = `job:${job.id}:succeeded`;
    const row = await delivered(key);

    const got = receiver.at('/down');
    expect(got.map((r) => r.status)).toEqual([500, 500, 500, 204]);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([key]));
    expect(new Set(got.map((r) => r.headers['idempotency-key']))).toEqual(new Set([key]));
    expect(new Set(got.map((r) => r.body)).size).toBe(1);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(got.map((r) => r.note)).toEqual([1, 1, 1, 1]); // the debit was already there at the first try
    // Exponential backoff: try k+1 comes at least base × 2^(k−1) / 2 after try k (the jitter keeps half).
    for (let k = 1; k < got.length; k++) {
      expect(got[k]!.receivedAt - got[k - 1]!.receivedAt).toBeGreaterThanOrEqual(Math.min(FAST.backoffCapMs!, FAST.backoffBaseMs! * 2 ** (k - 1)) / 2 - 1);
    }
    expect(row).toMatchObject({ attempts: 4, last_status: 204, last_error: expect.stringMatching(/^HTTP 500: receiver scripted to fail/) });

    const ledger = await ledgerOf(job.id);
    expect(ledger).toHaveLength(1);
    expect(ledger[0].at.getTime()).toBeLessThanOrEqual(got[0]!.receivedAt);
    expect(dataOf(await gql(api.graphqlUrl, owner.token, USAGE)).usage).toMatchObject({ total: 1, entries: [{ jobId: job.id }] });
  });

  it('refusing connections: every try is recorded with its error, and the debit stands', async () => {
    const owner = await makeToken(db.pool, 'refused');
    const port = await closedPort();
    dataOf(await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url: `http://127.0.0.1:${port}/nobody` }));
    const job = await createSummarizeJob(api, owner.token, 'refused-1');
    await succeed(job.attempts[0]!.id);
    const row = await waitUntil(async () => (await outboxOf(job.id)).find((r) => r.attempts >= 3), 'three failed tries');
    expect(row).toMatchObject({ delivered_at: null, last_status: null, last_error: expect.stringMatching(/ECONNREFUSED/) });
    expect(row.next_attempt_at.getTime()).toBeGreaterThan(row.last_attempt_at.getTime());
    expect(await ledgerOf(job.id)).toHaveLength(1);
  });
});

describe('cancel and failure', () => {
  it('cancelJob sends one job.cancelled callback and debits nothing', async () => {
    const owner = await ownerWithCallback('cancels', '/cancels');
    const job = await createSummarizeJob(api, owner.token, 'cancel-1');
    expect(dataOf(await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: job.id })).cancelJob).toMatchObject({ status: 'CANCELLED', version: 2 });
    dataOf(await gql(api.graphqlUrl, owner.token, CANCEL_JOB, { jobId: job.id })); // again: unchanged
    const key = `job:${job.id}:cancelled`;
    await delivered(key);
    const got = receiver.at('/cancels');
    expect(got).toHaveLength(1);
    expect(got[0]!.verified).toBe(true);
    expect(got[0]!.headers['webhook-id']).toBe(key);
    expect(JSON.parse(got[0]!.body)).toEqual({
      type: 'job.cancelled',
      jobId: job.id,
      idempotencyKey: 'cancel-1',
      status: 'CANCELLED',
      version: 2,
      result: null,
    });
    // A late result is DISCARDED: no debit, no job.succeeded.
    expect((await succeed(job.attempts[0]!.id)).outcome).toBe('DISCARDED');
    expect(await ledgerOf(job.id)).toEqual([]);
    expect((await outboxOf(job.id)).map((r) => r.effect_key)).toEqual([key]);
  });

  it('a failure with no fallback sends job.failed once; failing again after retryJob does not; succeeding then does, and debits', async () => {
    const owner = await ownerWithCallback('fails', '/fails');
    const job = await createSummarizeJob(api, owner.token, 'fail-1', { fallbackProviders: [] });
    const first = dataOf(await report(api, operator.token, job.attempts[0]!.id, { error: 'provider said no' })).reportAttemptResult;
    expect(first).toMatchObject({ outcome: 'FAILED', job: { status: 'FAILED', version: 1 } });
    const failedKey = `job:${job.id}:failed`;
    await delivered(failedKey);
    expect(JSON.parse(receiver.at('/fails', failedKey)[0]!.body)).toEqual({
      type: 'job.failed',
      jobId: job.id,
      idempotencyKey: 'fail-1',
      status: 'FAILED',
      version: 1,
      result: null,
    });

    const second = await retryOk(api, owner.token, job.id);
    expect(dataOf(await report(api, operator.token, second.id, { error: 'no again' })).reportAttemptResult.job.status).toBe('FAILED');
    expect((await outboxOf(job.id)).map((r) => r.effect_key)).toEqual([failedKey]);

    const third = await retryOk(api, owner.token, job.id);
    await succeed(third.id);
    await delivered(`job:${job.id}:succeeded`);
    const got = receiver.at('/fails');
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([failedKey, `job:${job.id}:succeeded`]);
    expect(JSON.parse(got[1]!.body)).toMatchObject({ type: 'job.succeeded', status: 'SUCCEEDED', version: 2, result: RESULT });
    expect(await ledgerOf(job.id)).toMatchObject([{ attempt_id: third.id, units: 1 }]);
  });

  it('a failure that falls over to a fallback is not an outcome: no job.failed', async () => {
    const owner = await ownerWithCallback('falls-over', '/falls-over');
    const job = await createSummarizeJob(api, owner.token, 'fallover-1'); // fallback: backup (manual)
    const res = dataOf(await report(api, operator.token, job.attempts[0]!.id, { error: 'primary down' })).reportAttemptResult;
    expect(res.job.status).toBe('RUNNING');
    expect(await outboxOf(job.id)).toEqual([]);
  });
});

describe('setCallback', () => {
  it('again replaces URL and secret: the next notification goes to the new URL, and the old secret no longer verifies it', async () => {
    const owner = await makeToken(db.pool, 'replaces');
    const old = dataOf(await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url: `${receiver.url}/old` })).setCallback;
    expect(old.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(old.secret.slice('whsec_'.length), 'base64').length).toBeGreaterThanOrEqual(24);
    const fresh = dataOf(await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url: `${receiver.url}/new` })).setCallback;
    expect(fresh.url).toBe(`${receiver.url}/new`);
    expect(fresh.secret).not.toBe(old.secret);
    receiver.script('/new', { secret: fresh.secret });

    // Read back: the URL, never the secret.
    expect(dataOf(await gql(api.graphqlUrl, owner.token, CALLBACK)).callback).toMatchObject({ url: `${receiver.url}/new`, secret: null });

    const job = await createSummarizeJob(api, owner.token, 'replace-1');
    await succeed(job.attempts[0]!.id);
    await delivered(`job:${job.id}:succeeded`);
    expect(receiver.at('/old')).toEqual([]);
    const [msg] = receiver.at('/new');
    expect(msg!.verified).toBe(true);
    expect(() => new Webhook(old.secret).verify(msg!.body, msg!.headers)).toThrow(/signature/i);
    expect(() => new Webhook(fresh.secret).verify(msg!.body, msg!.headers)).not.toThrow();
  });

  it('an owner with no callback reads null', async () => {
    const owner = await makeToken(db.pool, 'no-callback');
    expect(dataOf(await gql(api.graphqlUrl, owner.token, CALLBACK)).callback).toBeNull();
  });

  it('accepts http and https URLs up to 2048 characters; refuses anything else with BAD_USER_INPUT', async () => {
    const owner = await makeToken(db.pool, 'validates');
    const longest = `https://example.com/${'a'.repeat(2048 - 'https://example.com/'.length)}`;
    expect(dataOf(await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url: longest })).setCallback.url).toBe(longest);
    expect(dataOf(await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url: 'http://hooks.example.com:8080/a?b=c' })).setCallback.url).toBe(
      'http://hooks.example.com:8080/a?b=c',
    );
    for (const url of [`${longest}a`, 'ftp://example.com/x', 'javascript:alert(1)', 'not a url', '/relative', '', 'https://exa mple.com/', 'http://a.com/\u0000']) {
      const res = await gql(api.graphqlUrl, owner.token, SET_CALLBACK, { url });
      expect(errorCode(res), url).toBe('BAD_USER_INPUT');
    }
    // The refused ones changed nothing.
    expect(dataOf(await gql(api.graphqlUrl, owner.token, CALLBACK)).callback.url).toBe('http://hooks.example.com:8080/a?b=c');
  });

  it('needs a token', async () => {
    expect(errorCode(await gql(api.graphqlUrl, undefined, SET_CALLBACK, { url: 'https://example.com' }))).toBe('UNAUTHENTICATED');
  });
});

describe('usage', () => {
  it('an owner sees only its own ledger, newest first', async () => {
    const alice = await makeToken(db.pool, 'alice');
    const bob = await makeToken(db.pool, 'bob');
    const a1 = await createSummarizeJob(api, alice.token, 'same-key');
    const b1 = await createSummarizeJob(api, bob.token, 'same-key');
    const a2 = await createSummarizeJob(api, alice.token, 'other-key');
    await settleAttempt(api.app.core, a1.attempts[0]!.id, { result: RESULT }, 'test', { usageTokens: 10 });
    await settleAttempt(api.app.core, b1.attempts[0]!.id, { result: RESULT }, 'test', { usageTokens: 500 });
    await settleAttempt(api.app.core, a2.attempts[0]!.id, { result: RESULT }, 'test', { usageTokens: 20 });
    const aliceUsage = dataOf(await gql(api.graphqlUrl, alice.token, USAGE)).usage;
    expect(aliceUsage).toMatchObject({
      total: 30,
      entries: [
        { jobId: a2.id, effectKey: `job:${a2.id}:charge`, units: 20 },
        { jobId: a1.id, effectKey: `job:${a1.id}:charge`, units: 10 },
      ],
    });
    expect(dataOf(await gql(api.graphqlUrl, bob.token, USAGE)).usage).toMatchObject({ total: 500, entries: [{ jobId: b1.id, units: 500 }] });
    // `first` limits the entries, not the total.
    expect(dataOf(await gql(api.graphqlUrl, alice.token, USAGE, { first: 1 })).usage).toMatchObject({ total: 30, entries: [{ jobId: a2.id }] });
    expect(errorCode(await gql(api.graphqlUrl, alice.token, USAGE, { first: 0 }))).toBe('BAD_USER_INPUT');
    // A new owner's ledger is empty.
    const carol = await makeToken(db.pool, 'carol');
    expect(dataOf(await gql(api.graphqlUrl, carol.token, USAGE)).usage).toEqual({ total: 0, entries: [] });
  });
});

describe('several instances', () => {
  it('two instances running delivery workers deliver each notification exactly once', async () => {
    const second = await startEffectsInstance();
    const owner = await makeToken(db.pool, 'pair');
    const set = dataOf(await gql(second.graphqlUrl, owner.token, SET_CALLBACK, { url: `${receiver.url}/pair` })).setCallback;
    // A slow receiver keeps both workers busy at once.
    receiver.script('/pair', { secret: set.secret, onRequest: () => new Promise((r) => setTimeout(r, 60)) });
    const jobs = await Promise.all(Array.from({ length: 30 }, (_, i) => createSummarizeJob(i % 2 ? api : second, owner.token, `pair-${i}`)));
    await Promise.all(jobs.map((job, i) => report(i % 2 ? second : api, operator.token, job.attempts[0]!.id, { result: RESULT })));
    await waitUntil(
      async () => (await db.pool.query('SELECT count(*)::int AS n FROM callback_outbox WHERE owner_id = $1 AND delivered_at IS NOT NULL', [owner.caller.ownerId])).rows[0].n === 30,
      'all 30 notifications delivered',
      20_000,
    );
    const got = receiver.at('/pair');
    const perId = new Map<string, number>();
    for (const r of got) perId.set(r.headers['webhook-id']!, (perId.get(r.headers['webhook-id']!) ?? 0) + 1);
    expect(got).toHaveLength(30);
    expect([...perId.keys()].sort()).toEqual(jobs.map((j) => `job:${j.id}:succeeded`).sort());
    expect([...perId.values()].every((n) => n === 1)).toBe(true);
    expect(got.every((r) => r.verified)).toBe(true);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n, sum(units)::int AS units FROM usage_ledger WHERE owner_id = $1', [owner.caller.ownerId]);
    expect(rows[0]).toEqual({ n: 30, units: 30 });
  });
});

describe('backoff (driven by hand with a ManualClock)', () => {
  it('doubles the delay from the base, up to the cap, with jitter', () => {
    const tuning = { backoffBaseMs: 1_000, backoffCapMs: 600_000 };
    expect([1, 2, 3, 4].map((n) => backoffDelayMs(n, tuning, () => 1))).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect([1, 2, 3, 4].map((n) => backoffDelayMs(n, tuning, () => 0))).toEqual([500, 1_000, 2_000, 4_000]);
    expect(backoffDelayMs(30, tuning, () => 1)).toBe(600_000);
    expect(backoffDelayMs(1_000, tuning, () => 0)).toBe(300_000);
  });

  it('keeps retrying a dead receiver until a 2xx, the delay doubling up to its cap, past any window', async () => {
    const owner = await makeToken(db.pool, 'keeps-trying');
    const job = await createSummarizeJob(api, owner.token, 'keeps-trying-1');
    // Far in the future of the running instances' clocks, so that only this hand-driven worker sees it due.
    const clock = new ManualClock(Date.now() + 30 * 86_400_000);
    const created = clock.now();
    const port = await closedPort();
    const key = `test:${job.id}:keeps-trying`;
    await db.pool.query(
      `INSERT INTO callback_outbox (effect_key, owner_id, job_id, url, secret, body, created_at, expires_at, next_attempt_at)
       VALUES ($1, $2, $3, $4, $5, '{}', $6, $6::timestamptz + interval '180 seconds', $6)`,
      [key, owner.caller.ownerId, job.id, `http://127.0.0.1:${port}/`, 'whsec_' + Buffer.alloc(32, 7).toString('base64'), created],
    );
    const core = { ...api.app.core, clock, config: Config.parse({ ...CONFIG, effects: { senderRetryWindowSeconds: 60 } }) };
    const worker = new CallbackDeliveryWorker(core, { backoffBaseMs: 1_000, backoffCapMs: 600_000 });
    const row = async () => (await db.pool.query('SELECT * FROM callback_outbox WHERE effect_key = $1', [key])).rows[0];

    const delays: number[] = [];
    for (let i = 0; i < 24; i++) {
      const before = await row();
      clock.advance(before.next_attempt_at.getTime() - clock.now().getTime());
      const triedAt = clock.now().getTime();
      expect((await worker.deliverDue()).failed).toBeGreaterThanOrEqual(1);
      const after = await row();
      expect(after.attempts).toBe(before.attempts + 1);
      delays.push(after.next_attempt_at.getTime() - triedAt);
    }
    const final = await row();
    expect(final).toMatchObject({ delivered_at: null, claimed_until: null, last_error: expect.stringMatching(/ECONNREFUSED/) });
    expect(clock.now().getTime() - created.getTime()).toBeGreaterThan(3_600_000); // well past the 60 s window
    // Each delay lies in [half, all] of base × 2^(n−1), capped at 10 minutes.
    delays.forEach((d, n) => {
      const full = Math.min(1_000 * 2 ** n, 600_000);
      expect(d).toBeGreaterThanOrEqual(full / 2);
      expect(d).toBeLessThanOrEqual(full);
    });
    await worker.stop();
  });
});
