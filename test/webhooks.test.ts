// Inbound result webhooks (CONTRACT.md section 8): Standard Webhooks signatures, deduplication by the
// natural key (provider, requestId, status), and a refused delivery changes nothing.
import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import { Config } from '../config.ts';
import { MAX_WEBHOOK_BODY_BYTES } from '../webhooks/inbound.ts';
import { GOOD_SUMMARY, JOB, dataOf, gql } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { holdJob, waitForLockWaiters } from './helpers/holds.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';
import { cancelAttemptOk, createSummarizeJob, eventTypes, report, retryOk, timeOut } from './helpers/scenario.ts';

const SECRET_ENV = 'ONEJOB_TEST_WEBHOOK_SECRET';
const UNSET_ENV = 'ONEJOB_TEST_WEBHOOK_SECRET_UNSET';
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const OTHER_SECRET = `whsec_${randomBytes(32).toString('base64')}`;
/** primary's sender retry window; backup keeps the default (86400 s). */
const PRIMARY_WINDOW_SECONDS = 600;

let db: TestDatabase;
let api: Instance;
let clock: ManualClock;
let config: Config;
let owner: TestToken;
let operator: TestToken;

beforeAll(async () => {
  db = await createTestDatabase('webhooks');
  process.env[SECRET_ENV] = SECRET;
  delete process.env[UNSET_ENV];
  config = Config.parse({
    providers: {
      primary: { kind: 'manual', webhookSecretEnv: SECRET_ENV, senderRetryWindowSeconds: PRIMARY_WINDOW_SECONDS },
      backup: { kind: 'manual', webhookSecretEnv: SECRET_ENV },
      plain: { kind: 'manual' },
      unset: { kind: 'manual', webhookSecretEnv: UNSET_ENV },
    },
  });
  // The signature's timestamp is checked against the real clock (by the library); the service's own
  // times (received_at, Dedup-Expires-At) come from this one, which starts at the real time.
  clock = new ManualClock();
  api = await startInstance(db.url, { config, clock, sweepDeadlines: false });
  owner = await makeToken(db.pool, 'webhook-owner');
  operator = await makeToken(db.pool, 'webhook-ops', 'operator');
});

interface Delivery {
  status: number;
  headers: Headers;
  body: any;
}

interface DeliverOptions {
  webhookId?: string;
  timestamp?: Date;
  secret?: string;
  /** Headers to leave out, or to send instead of the computed ones. */
  omit?: string[];
  headers?: Record<string, string>;
  method?: string;
  target?: Instance;
}

/** POSTs `body` (JSON-encoded unless a string) to /webhooks/{provider}, signed as a Standard Webhooks sender does. */
async function deliver(provider: string, body: unknown, opts: DeliverOptions = {}): Promise<Delivery> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  const webhookId = opts.webhookId ?? `msg_${randomUUID()}`;
  const timestamp = opts.timestamp ?? new Date();
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'webhook-id': webhookId,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(opts.secret ?? SECRET).sign(webhookId, timestamp, payload),
    ...opts.headers,
  };
  for (const name of opts.omit ?? []) delete headers[name];
  const res = await fetch(`${(opts.target ?? api).url}/webhooks/${provider}`, {
    method: opts.method ?? 'POST',
    headers,
    body: opts.method === 'GET' ? undefined : payload,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const succeeded = (attemptId: string, requestId = `req-${randomUUID()}`, result: unknown = GOOD_SUMMARY) => ({
  attemptId,
  requestId,
  status: 'succeeded',
  result,
});
const failed = (attemptId: string, requestId = `req-${randomUUID()}`, error = 'the provider gave up') => ({
  attemptId,
  requestId,
  status: 'failed',
  error,
});

async function job(jobId: string) {
  return dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id: jobId })).job;
}

async function deliveries(requestId?: string) {
  const { rows } = await db.pool.query(
    `SELECT provider, request_id, status, attempt_id, outcome, received_at, expires_at, webhook_id
     FROM webhook_deliveries WHERE $1::text IS NULL OR request_id = $1 ORDER BY received_at, status`,
    [requestId ?? null],
  );
  return rows;
}

/** Everything a delivery could change, to compare before and after a refused one. */
async function everything() {
  const { rows } = await db.pool.query(`
    SELECT (SELECT count(*) FROM webhook_deliveries)::int AS deliveries,
           (SELECT count(*) FROM job_events)::int AS events,
           (SELECT count(*) FROM race_log)::int AS races,
           (SELECT string_agg(id || ':' || state || ':' || coalesce(error, ''), ',' ORDER BY id) FROM attempts) AS attempts,
           (SELECT string_agg(id || ':' || version || ':' || coalesce(result::text, ''), ',' ORDER BY id) FROM jobs) AS jobs`);
  return rows[0];
}

describe('a new delivery settles the attempt as reportAttemptResult would', () => {
  it('succeeded: the attempt wins, the job is SUCCEEDED, and the key expires 3 × the window after receipt', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-success');
    const attemptId = created.attempts[0]!.id;
    const requestId = 'req-success';
    const receivedAt = clock.now();
    const res = await deliver('primary', succeeded(attemptId, requestId));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ outcome: 'WON', duplicate: false });
    const expected = new Date(receivedAt.getTime() + 3 * PRIMARY_WINDOW_SECONDS * 1000);
    expect(res.headers.get('dedup-expires-at')).toBe(expected.toISOString());

    const after = await job(created.id);
    expect(after).toMatchObject({ status: 'SUCCEEDED', version: 2, result: GOOD_SUMMARY, completedBy: { id: attemptId } });
    expect((await eventTypes(db.pool, created.id)).slice(-2)).toEqual(['ATTEMPT_SUCCEEDED', 'JOB_SUCCEEDED']);
    const [row] = await deliveries(requestId);
    expect(row).toMatchObject({ provider: 'primary', status: 'succeeded', attempt_id: attemptId, outcome: 'WON' });
    expect(row.received_at.getTime()).toBe(receivedAt.getTime());
    expect(row.expires_at.getTime()).toBe(expected.getTime());
  });

  it('a provider without senderRetryWindowSeconds keeps keys 3 × 86400 s', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-default-window', { provider: 'backup', fallbackProviders: [] });
    const receivedAt = clock.now();
    const res = await deliver('backup', succeeded(created.attempts[0]!.id));
    expect(res.status).toBe(200);
    expect(res.headers.get('dedup-expires-at')).toBe(new Date(receivedAt.getTime() + 3 * 86_400_000).toISOString());
  });

  it('failed: the attempt is FAILED and the fallback starts by itself', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-failed');
    const attemptId = created.attempts[0]!.id;
    const res = await deliver('primary', failed(attemptId, 'req-failed', 'model overloaded'));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ outcome: 'FAILED', duplicate: false });
    const after = await job(created.id);
    expect(after.attempts.map((a: { provider: string; state: string }) => `${a.provider}:${a.state}`)).toEqual(['primary:FAILED', 'backup:RUNNING']);
    expect(after.attempts[0].error).toBe('model overloaded');
    expect(after.status).toBe('RUNNING');
  });

  it('a result that breaks the output contract fails the attempt, as a report would', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-bad-output', { fallbackProviders: [] });
    const res = await deliver('primary', succeeded(created.attempts[0]!.id, 'req-bad-output', { ...GOOD_SUMMARY, extra: 1 }));
    expect(res.body).toEqual({ outcome: 'FAILED', duplicate: false });
    expect((await job(created.id)).status).toBe('FAILED');
  });

  it('a late webhook result after another attempt won is DISCARDED and logged as a race', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-late');
    const attempt1 = created.attempts[0]!.id;
    await timeOut(api, clock);
    await cancelAttemptOk(api, operator.token, attempt1);
    const attempt2 = await retryOk(api, owner.token, created.id, 'backup');
    expect(dataOf(await report(api, operator.token, attempt2.id, { result: GOOD_SUMMARY })).reportAttemptResult.outcome).toBe('WON');

    const late = await deliver('primary', succeeded(attempt1, 'req-late', { summary: 'Late fox.', keyPoints: ['late'] }));
    expect(late.status).toBe(200);
    expect(late.body).toEqual({ outcome: 'DISCARDED', duplicate: false });
    const after = await job(created.id);
    expect(after).toMatchObject({ status: 'SUCCEEDED', version: 2, result: GOOD_SUMMARY, completedBy: { id: attempt2.id } });
    expect(after.attempts[0].state).toBe('DISCARDED');
    const { rows } = await db.pool.query('SELECT loser_attempt_id, winner_attempt_id FROM race_log WHERE job_id = $1', [created.id]);
    expect(rows).toEqual([{ loser_attempt_id: attempt1, winner_attempt_id: attempt2.id }]);
    // Delivered again, it answers the stored outcome.
    expect((await deliver('primary', succeeded(attempt1, 'req-late', { summary: 'Late fox.', keyPoints: ['late'] }))).body).toEqual({
      outcome: 'DISCARDED',
      duplicate: true,
    });
  });
});

describe('deduplication by the natural key (provider, requestId, status)', () => {
  it('the same delivery 5 times at once: one state change, one duplicate:false, four duplicate:true, one outcome', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-storm');
    const attemptId = created.attempts[0]!.id;
    const body = succeeded(attemptId, 'req-storm');
    const webhookId = `msg_${randomUUID()}`;
    const timestamp = new Date();
    // The first delivery claims the key and queues on the job's lock (held here); the other four queue
    // on its claim. Released together, the database decides.
    const hold = await holdJob(db.pool, created.id);
    const storm = Array.from({ length: 5 }, () => deliver('primary', body, { webhookId, timestamp }));
    await waitForLockWaiters(db.pool, db.name, 5);
    expect(await deliveries('req-storm')).toEqual([]); // the claim is not committed while the job is held
    await hold.release();
    const answers = await Promise.all(storm);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((a) => a.body.outcome)).toEqual(['WON', 'WON', 'WON', 'WON', 'WON']);
    expect(answers.filter((a) => a.body.duplicate === false)).toHaveLength(1);
    expect(answers.filter((a) => a.body.duplicate === true)).toHaveLength(4);
    expect(new Set(answers.map((a) => a.headers.get('dedup-expires-at'))).size).toBe(1);

    const types = await eventTypes(db.pool, created.id);
    expect(types.filter((t) => t === 'ATTEMPT_SUCCEEDED')).toHaveLength(1);
    expect(types.filter((t) => t === 'JOB_SUCCEEDED')).toHaveLength(1);
    expect((await job(created.id)).version).toBe(2);
    expect(await deliveries('req-storm')).toHaveLength(1);
  });

  it('a redelivery under a NEW webhook-id (the sender regenerated its outbox) is still a duplicate', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-new-id');
    const body = succeeded(created.attempts[0]!.id, 'req-new-id');
    const first = await deliver('primary', body, { webhookId: 'msg_original' });
    expect(first.body).toEqual({ outcome: 'WON', duplicate: false });
    const eventsAfterFirst = await eventTypes(db.pool, created.id);
    clock.advance(60_000);
    const again = await deliver('primary', body, { webhookId: 'msg_regenerated' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ outcome: 'WON', duplicate: true });
    // The key's expiry is the first delivery's, not moved by the redelivery.
    expect(again.headers.get('dedup-expires-at')).toBe(first.headers.get('dedup-expires-at'));
    expect(await eventTypes(db.pool, created.id)).toEqual(eventsAfterFirst);
    expect(await deliveries('req-new-id')).toMatchObject([{ webhook_id: 'msg_original', outcome: 'WON' }]);
  });

  it('a redelivery after the service restarted is still a duplicate', async () => {
    const first = await startInstance(db.url, { config, clock, sweepDeadlines: false });
    const created = await createSummarizeJob(first, owner.token, 'wh-restart');
    const body = failed(created.attempts[0]!.id, 'req-restart');
    expect((await deliver('primary', body, { target: first })).body).toEqual({ outcome: 'FAILED', duplicate: false });
    const before = await everything();
    await first.stop();

    const second = await startInstance(db.url, { config, clock, sweepDeadlines: false });
    const again = await deliver('primary', body, { target: second });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ outcome: 'FAILED', duplicate: true });
    expect(await everything()).toEqual(before);
    await second.stop();
  });

  it('the same requestId with the other status is another key: recorded, answered with the attempt’s outcome, nothing changed', async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-other-status');
    const attemptId = created.attempts[0]!.id;
    expect((await deliver('primary', succeeded(attemptId, 'req-both'))).body).toEqual({ outcome: 'WON', duplicate: false });
    const before = await everything();
    const res = await deliver('primary', failed(attemptId, 'req-both'));
    expect(res.body).toEqual({ outcome: 'WON', duplicate: false });
    expect(await everything()).toEqual({ ...before, deliveries: before.deliveries + 1 });
    expect((await job(created.id)).attempts[0].state).toBe('SUCCEEDED');
  });

  it('a requestId already delivered for another attempt is refused (409) and changes nothing', async () => {
    const a = await createSummarizeJob(api, owner.token, 'wh-reuse-a');
    const b = await createSummarizeJob(api, owner.token, 'wh-reuse-b');
    expect((await deliver('primary', succeeded(a.attempts[0]!.id, 'req-reused'))).status).toBe(200);
    const before = await everything();
    const res = await deliver('primary', succeeded(b.attempts[0]!.id, 'req-reused'));
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('REQUEST_ID_REUSED');
    expect(res.body.error.message).toContain(a.attempts[0]!.id);
    expect(await everything()).toEqual(before);
    expect((await job(b.id)).status).toBe('RUNNING');
  });
});

describe('refused deliveries change nothing', () => {
  let attemptId: string;
  let jobId: string;

  beforeAll(async () => {
    const created = await createSummarizeJob(api, owner.token, 'wh-refused');
    attemptId = created.attempts[0]!.id;
    jobId = created.id;
  });

  async function refused(expected: number, send: () => Promise<Delivery>): Promise<Delivery> {
    const before = await everything();
    const res = await send();
    expect(res.status, JSON.stringify(res.body)).toBe(expected);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(res.body.error).toEqual(expect.objectContaining({ code: expect.any(String), message: expect.any(String) }));
    expect(res.headers.get('dedup-expires-at')).toBeNull();
    expect(await everything()).toEqual(before);
    return res;
  }

  describe('401: signature and timestamp', () => {
    const cases: [string, () => DeliverOptions & { body?: string }][] = [
      ['a signature made with another secret', () => ({ secret: OTHER_SECRET })],
      ['a signature of another body', () => ({ headers: { 'webhook-signature': new Webhook(SECRET).sign('msg_x', new Date(), '{}') } })],
      ['a signature for another webhook-id', () => ({ headers: { 'webhook-id': 'msg_swapped' } })],
      ['a garbage signature', () => ({ headers: { 'webhook-signature': 'v1,bm90IGEgc2lnbmF0dXJl' } })],
      ['no webhook-signature', () => ({ omit: ['webhook-signature'] })],
      ['no webhook-id', () => ({ omit: ['webhook-id'] })],
      ['no webhook-timestamp', () => ({ omit: ['webhook-timestamp'] })],
      ['no signature headers at all', () => ({ omit: ['webhook-id', 'webhook-timestamp', 'webhook-signature'] })],
      ['a timestamp 6 minutes old', () => ({ timestamp: new Date(Date.now() - 6 * 60_000) })],
      ['a timestamp 6 minutes ahead', () => ({ timestamp: new Date(Date.now() + 6 * 60_000) })],
      ['a timestamp that is not a number', () => ({ headers: { 'webhook-timestamp': 'yesterday' } })],
    ];
    for (const [name, options] of cases) {
      it(name, async () => {
        const res = await refused(401, () => deliver('primary', succeeded(attemptId, `req-401-${randomUUID()}`), options()));
        expect(res.body.error.code).toBe('UNAUTHENTICATED');
      });
    }

    it('nothing was settled by any of them', async () => {
      expect((await job(jobId)).status).toBe('RUNNING');
      expect(await deliveries().then((rows) => rows.filter((r) => r.request_id.startsWith('req-401-')))).toEqual([]);
    });
  });

  describe('400: malformed bodies name the field', () => {
    const cases: [string, () => unknown, string][] = [
      ['not JSON', () => '{"attemptId": ', '(body)'],
      ['an array', () => [], '(body)'],
      ['null', () => 'null', '(body)'],
      ['no attemptId', () => ({ requestId: 'r', status: 'succeeded', result: GOOD_SUMMARY }), 'attemptId'],
      ['a numeric attemptId', () => ({ ...succeeded(attemptId), attemptId: 7 }), 'attemptId'],
      ['no requestId', () => ({ attemptId, status: 'succeeded', result: GOOD_SUMMARY }), 'requestId'],
      ['an empty requestId', () => succeeded(attemptId, ''), 'requestId'],
      ['a requestId of 256 characters', () => succeeded(attemptId, 'r'.repeat(256)), 'requestId'],
      ['a requestId with a control character', () => succeeded(attemptId, 'req\nnewline'), 'requestId'],
      ['an unknown status', () => ({ ...succeeded(attemptId), status: 'done' }), 'status'],
      ['no status', () => ({ attemptId, requestId: 'r', result: GOOD_SUMMARY }), 'status'],
      ['succeeded without result', () => ({ attemptId, requestId: 'r', status: 'succeeded' }), 'result'],
      ['succeeded with a null result', () => ({ attemptId, requestId: 'r', status: 'succeeded', result: null }), 'result'],
      ['succeeded with an error too', () => ({ ...succeeded(attemptId), error: 'and a failure' }), 'error'],
      ['failed without error', () => ({ attemptId, requestId: 'r', status: 'failed' }), 'error'],
      ['failed with a blank error', () => failed(attemptId, 'r', '   '), 'error'],
      ['failed with a result too', () => ({ ...failed(attemptId), result: GOOD_SUMMARY }), 'result'],
      ['an unknown key', () => ({ ...succeeded(attemptId), priority: 1 }), 'priority'],
      ['a result with a NUL character', () => succeeded(attemptId, 'r', { summary: 'a\u0000b', keyPoints: ['x'] }), 'result'],
    ];
    for (const [name, body, field] of cases) {
      it(name, async () => {
        const res = await refused(400, () => deliver('primary', body()));
        expect(res.body.error.code).toBe('BAD_USER_INPUT');
        expect(res.body.error.field).toBe(field);
        expect(res.body.error.message.startsWith(`${field}:`)).toBe(true);
      });
    }

    it('a body that is not UTF-8, even signed', async () => {
      const bytes = Buffer.concat([Buffer.from('{"attemptId":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
      const webhookId = `msg_${randomUUID()}`;
      const now = new Date();
      await refused(400, async () => {
        const res = await fetch(`${api.url}/webhooks/primary`, {
          method: 'POST',
          headers: {
            'webhook-id': webhookId,
            'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
            'webhook-signature': new Webhook(SECRET).sign(webhookId, now, bytes),
          },
          body: bytes,
        });
        return { status: res.status, headers: res.headers, body: await res.json() };
      });
    });
  });

  describe('404: no such attempt for this provider, or no webhooks for this provider', () => {
    it('an attempt that does not exist', async () => {
      const res = await refused(404, () => deliver('primary', succeeded(randomUUID())));
      expect(res.body.error.code).toBe('NOT_FOUND');
    });

    it('an attemptId that is not an attempt id at all', async () => {
      await refused(404, () => deliver('primary', succeeded('not-a-uuid')));
    });

    it('another provider’s attempt (signed with a valid secret for the URL’s provider)', async () => {
      const res = await refused(404, () => deliver('backup', succeeded(attemptId)));
      expect(res.body.error.code).toBe('NOT_FOUND');
      expect((await job(jobId)).status).toBe('RUNNING');
    });

    it('a provider configured without webhookSecretEnv', async () => {
      await refused(404, () => deliver('plain', succeeded(attemptId)));
    });

    it('a provider that does not exist, and paths that name no provider', async () => {
      await refused(404, () => deliver('nope', succeeded(attemptId)));
      await refused(404, () => deliver('constructor', succeeded(attemptId)));
      await refused(404, () => deliver('primary/extra', succeeded(attemptId)));
      await refused(404, () => deliver('', succeeded(attemptId)));
    });
  });

  it('503 when the configured secret variable is not set: the service cannot verify', async () => {
    const res = await refused(503, () => deliver('unset', succeeded(attemptId)));
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.body.error.message).toMatch(/cannot be verified/);
  });

  it('405 for a method other than POST', async () => {
    const res = await refused(405, () => deliver('primary', '', { method: 'GET' }));
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('401 for a body sent without signature headers, and the unread body does not wedge the connection', async () => {
    const res = await refused(401, () => deliver('primary', succeeded(attemptId), { omit: ['webhook-signature'] }));
    expect(res.body.error.code).toBe('UNAUTHENTICATED');
    for (let i = 0; i < 4; i++) expect((await deliver('primary', succeeded(randomUUID()))).status).toBe(404);
  });

  it('413 for a body over 1 MiB, and the service still answers', async () => {
    const big = { ...succeeded(attemptId), result: { summary: 'x'.repeat(MAX_WEBHOOK_BODY_BYTES), keyPoints: ['x'] } };
    const res = await refused(413, () => deliver('primary', big));
    expect(res.body.error.code).toBe('BAD_USER_INPUT');
    expect((await deliver('primary', succeeded(randomUUID()))).status).toBe(404);
  });

  it('413 for an oversize chunked body (no Content-Length)', async () => {
    const chunk = new TextEncoder().encode(' '.repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > MAX_WEBHOOK_BODY_BYTES * 2) return controller.close();
        controller.enqueue(chunk);
        sent += chunk.byteLength;
      },
    });
    // Signature headers present (the size is refused before the signature is checked: it covers the whole body).
    const now = new Date();
    const headers = {
      'webhook-id': 'msg_big',
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign('msg_big', now, '{}'),
    };
    await refused(413, async () => {
      const res = await fetch(`${api.url}/webhooks/primary`, { method: 'POST', headers, body: stream, duplex: 'half' } as RequestInit);
      return { status: res.status, headers: res.headers, body: await res.json() };
    });
    for (let i = 0; i < 4; i++) expect((await deliver('primary', succeeded(randomUUID()))).status).toBe(404);
  });

  it('after all of that, a good delivery is still accepted', async () => {
    const res = await deliver('primary', succeeded(attemptId, 'req-after-refusals'));
    expect(res.body).toEqual({ outcome: 'WON', duplicate: false });
  });
});
