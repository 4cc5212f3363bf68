// Bad input, bad credentials and bad requests, all over real HTTP (and WebSocket) against a started
// instance: every refusal carries a contract code (CONTRACT.md section 5), names what is wrong, and
// writes nothing; unexpected failures are masked.
import { randomUUID } from 'node:crypto';
import { createClient, type Client, type ExecutionResult } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { MAX_REQUEST_BODY_BYTES } from '../app.ts';
import {
  CANCEL_ATTEMPT,
  CANCEL_JOB,
  CREATE_JOB,
  GOOD_SUMMARY,
  JOB,
  REPORT,
  RETRY_JOB,
  dataOf,
  errorCode,
  gql,
  summarizeInput,
  type GraphQLResponse,
} from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';

let db: TestDatabase;
let api: Instance;
let alice: TestToken;
let bob: TestToken;
let operator: TestToken;

type GqlError = NonNullable<GraphQLResponse['errors']>[number];

async function counts() {
  const { rows } = await db.pool.query(`SELECT
    (SELECT count(*)::int FROM jobs) AS jobs, (SELECT count(*)::int FROM attempts) AS attempts,
    (SELECT count(*)::int FROM job_events) AS events, (SELECT count(*)::int FROM idempotency_keys) AS keys`);
  return rows[0] as { jobs: number; attempts: number; events: number; keys: number };
}

/** Sends a request that must be refused with `code` (one error, no data) and must write nothing. */
async function refused(token: string | undefined, query: string, variables: Record<string, unknown>, code: string): Promise<GqlError> {
  const before = await counts();
  const res = await gql(api.graphqlUrl, token, query, variables);
  expect(errorCode(res), JSON.stringify(res.errors)).toBe(code);
  expect(res.data ?? null).toBeNull();
  expect(await counts()).toEqual(before);
  return res.errors![0]!;
}

const refuseCreate = (input: Record<string, unknown>, code = 'BAD_USER_INPUT') => refused(alice.token, CREATE_JOB, { input }, code);

/** The error names `field`: in extensions.field when the service knows it, else at least in the message. */
function expectNames(error: GqlError, field: string): void {
  expect(`${error.extensions?.field ?? ''} ${error.message}`).toContain(field);
}

/** A request the client got wrong: every error is BAD_USER_INPUT (never uncoded, never INTERNAL_SERVER_ERROR). */
function expectBadRequest(res: { status: number; errors?: GqlError[] }): void {
  expect(res.status).toBeLessThan(500);
  expect(res.errors?.length, JSON.stringify(res)).toBeGreaterThan(0);
  for (const e of res.errors!) {
    expect(e.extensions?.code, JSON.stringify(e)).toBe('BAD_USER_INPUT');
    expect(typeof e.message).toBe('string');
  }
}

/** A POST with a body exactly as given (for bodies `gql` cannot produce). */
async function rawPost(body: BodyInit, headers: Record<string, string> = {}, extra: RequestInit = {}) {
  const res = await fetch(api.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${alice.token}`, ...headers },
    body,
    ...extra,
  });
  const text = await res.text();
  let json: { data?: unknown; errors?: GqlError[] } = {};
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`status ${res.status}, not a JSON body: ${text.slice(0, 200)}`);
  }
  return { status: res.status, contentType: res.headers.get('content-type'), text, ...json };
}

const newJob = async (key: string, token = alice.token) =>
  dataOf(await gql(api.graphqlUrl, token, CREATE_JOB, { input: summarizeInput(key) })).createJob.job;

const stillAlive = async () => expect(dataOf(await gql(api.graphqlUrl, alice.token, '{ __typename }'))).toEqual({ __typename: 'Query' });

beforeAll(async () => {
  db = await createTestDatabase('bad_input');
  // No deadline sweep: attempts made here must not move on their own between a "before" and an "after".
  api = await startInstance(db.url, { sweepDeadlines: false });
  alice = await makeToken(db.pool, 'alice');
  bob = await makeToken(db.pool, 'bob');
  operator = await makeToken(db.pool, 'ops', 'operator');
});

describe('createJob: idempotencyKey', () => {
  it('missing: BAD_USER_INPUT naming idempotencyKey, nothing written', async () => {
    const { idempotencyKey: _omitted, ...input } = summarizeInput('unused');
    expectNames(await refuseCreate(input), 'idempotencyKey');
  });

  it.for([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['256 emoji', '😀'.repeat(256)],
    ['NUL', 'key\u0000'],
    ['BEL', 'key\u0007x'],
    ['newline', 'key\nx'],
    ['tab', '\tkey'],
    ['DEL', 'key\u007f'],
    ['C1 (NEL)', 'key\u0085'],
  ])('%s: BAD_USER_INPUT naming input.idempotencyKey, nothing written', async ([, key]) => {
    const error = await refuseCreate(summarizeInput(key!));
    expect(error.extensions?.field).toBe('input.idempotencyKey');
    expect(error.message).toContain('idempotencyKey');
  });

  it('255 characters is accepted and stored exactly', async () => {
    const key = 'k'.repeat(254) + 'z';
    const res = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput(key) })).createJob;
    expect(res).toMatchObject({ replayed: false, job: { idempotencyKey: key } });
  });

  it('length is in characters: 255 emoji (510 UTF-16 units, 1020 bytes) are accepted and replay', async () => {
    const key = '😀'.repeat(254) + '🦊';
    const first = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput(key) })).createJob;
    expect(first).toMatchObject({ replayed: false, job: { idempotencyKey: key } });
    const again = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput(key) })).createJob;
    expect(again).toMatchObject({ replayed: true, job: { id: first.job.id } });
  });

  it('an unpaired surrogate is refused: two different keys must never be stored as the same key', async () => {
    for (const key of ['a\uD800', 'a\uDC00', '\uDBFFb']) {
      const error = await refuseCreate(summarizeInput(key));
      expect(error.extensions?.field).toBe('input.idempotencyKey');
    }
  });

  it('jobByKey with a key no job can hold answers null (not an error)', async () => {
    for (const key of ['', 'nul\u0000', 'k'.repeat(300), 'a\uD800']) {
      const res = await gql(api.graphqlUrl, alice.token, 'query($k: String!) { jobByKey(idempotencyKey: $k) { id } }', { k: key });
      expect(res.errors).toBeUndefined();
      expect(res.data).toEqual({ jobByKey: null });
    }
  });
});

describe('createJob: operation, providers, input, timeout', () => {
  it('unknown operation: UNKNOWN_OPERATION naming the operation', async () => {
    for (const operation of ['translate', '', 'Summarize', '__proto__', 'constructor']) {
      const error = await refuseCreate(summarizeInput(`op-${operation}`, { operation }), 'UNKNOWN_OPERATION');
      expect(error.extensions?.field).toBe('input.operation');
    }
  });

  it('unknown primary provider: UNKNOWN_PROVIDER naming input.provider', async () => {
    for (const provider of ['nope', '', 'Primary', '__proto__', 'toString']) {
      const error = await refuseCreate(summarizeInput(`p-${provider}`, { provider, fallbackProviders: [] }), 'UNKNOWN_PROVIDER');
      expect(error.extensions?.field).toBe('input.provider');
      expect(error.message).toContain(`"${provider}"`);
    }
  });

  it('unknown fallback provider: UNKNOWN_PROVIDER naming its position', async () => {
    const first = await refuseCreate(summarizeInput('fb-1', { fallbackProviders: ['nope'] }), 'UNKNOWN_PROVIDER');
    expect(first.extensions?.field).toBe('input.fallbackProviders.0');
    const second = await refuseCreate(summarizeInput('fb-2', { fallbackProviders: ['backup', 'constructor'] }), 'UNKNOWN_PROVIDER');
    expect(second.extensions?.field).toBe('input.fallbackProviders.1');
  });

  it('a repeated provider is BAD_USER_INPUT naming fallbackProviders', async () => {
    for (const fallbackProviders of [['primary'], ['backup', 'backup']]) {
      const error = await refuseCreate(summarizeInput('repeat', { fallbackProviders }));
      expect(error.extensions?.field).toBe('input.fallbackProviders');
    }
  });

  it.for([
    ['summarize, empty text', { input: { text: '' } }, 'input.input.text', 'text'],
    ['summarize, text too long', { input: { text: 'x'.repeat(20_001) } }, 'input.input.text', 'text'],
    ['summarize, text not a string', { input: { text: 42 } }, 'input.input.text', 'text'],
    ['summarize, no text', { input: {} }, 'input.input.text', 'text'],
    ['summarize, an extra key', { input: { text: 'A long enough text.', extra: 1 } }, 'input.input', '"extra"'],
    ['summarize, input not an object', { input: 'just text' }, 'input.input', 'input'],
    ['classify, one label', { operation: 'classify', input: { text: 't', labels: ['only'] } }, 'input.input.labels', 'labels'],
    ['classify, duplicate labels', { operation: 'classify', input: { text: 't', labels: ['a', 'b', 'a'] } }, 'input.input.labels', 'distinct'],
    ['classify, 51 labels', { operation: 'classify', input: { text: 't', labels: Array.from({ length: 51 }, (_, i) => `l${i}`) } }, 'input.input.labels', 'labels'],
    ['classify, an empty label', { operation: 'classify', input: { text: 't', labels: ['a', ''] } }, 'input.input.labels.1', 'labels'],
  ] as const)('invalid operation input (%s): BAD_USER_INPUT naming the field', async ([, change, field, inMessage]) => {
    const error = await refuseCreate(summarizeInput('bad-op-input', change));
    expect(error.extensions?.field).toBe(field);
    expect(error.message).toContain(inMessage);
  });

  it('input text the database cannot store (U+0000, an unpaired surrogate) is BAD_USER_INPUT, not INTERNAL_SERVER_ERROR', async () => {
    for (const input of [{ text: 'before\u0000after' }, { text: 'a lone \uD800 surrogate' }, { text: 'fine', ['k\u0000']: 1 }]) {
      const error = await refuseCreate(summarizeInput('unstorable', { input }));
      expect(error.message).toContain('input.input');
    }
    // The same inside a GraphQL literal rather than a variable.
    const before = await counts();
    const literal = await gql(
      api.graphqlUrl,
      alice.token,
      'mutation { createJob(input: { idempotencyKey: "lit", operation: "summarize", provider: "primary", input: { text: "a\\u0000b" } }) { replayed } }',
    );
    expect(errorCode(literal)).toBe('BAD_USER_INPUT');
    expect(await counts()).toEqual(before);
  });

  it('attemptTimeoutMs outside 100..3600000 (or not an integer) is BAD_USER_INPUT naming it', async () => {
    for (const attemptTimeoutMs of [99, 3_600_001, 0, -1]) {
      const error = await refuseCreate(summarizeInput(`t-${attemptTimeoutMs}`, { attemptTimeoutMs }));
      expect(error.extensions?.field).toBe('input.attemptTimeoutMs');
    }
    for (const attemptTimeoutMs of [100.5, '5000', 2 ** 31]) {
      expectNames(await refuseCreate(summarizeInput('t-type', { attemptTimeoutMs })), 'attemptTimeoutMs');
    }
  });

  it('attemptTimeoutMs at the bounds (100 and 3600000) is accepted', async () => {
    for (const attemptTimeoutMs of [100, 3_600_000]) {
      const job = dataOf(await gql(api.graphqlUrl, alice.token, CREATE_JOB, { input: summarizeInput(`bound-${attemptTimeoutMs}`, { attemptTimeoutMs }) }))
        .createJob.job;
      expect(Date.parse(job.attempts[0].deadlineAt) - Date.parse(job.attempts[0].startedAt)).toBe(attemptTimeoutMs);
    }
  });

  it('a wrong type or a missing field in the input object is BAD_USER_INPUT naming it', async () => {
    expectNames(await refuseCreate(summarizeInput('types', { fallbackProviders: [{ name: 'backup' }] })), 'fallbackProviders');
    expectNames(await refuseCreate(summarizeInput('types', { provider: null })), 'provider');
    const { input: _input, ...noInput } = summarizeInput('types');
    expectNames(await refuseCreate(noInput), 'input');
    expectNames(await refuseCreate(summarizeInput('types', { owner: 'bob' })), 'owner'); // no such field: the owner is the token's
  });
});

describe('request body size', () => {
  /** A valid request of exactly `bytes` bytes (the padding is an unused variable). */
  function bodyOf(bytes: number): string {
    const empty = JSON.stringify({ query: '{ __typename }', variables: { pad: '' } });
    return JSON.stringify({ query: '{ __typename }', variables: { pad: 'x'.repeat(bytes - empty.length) } });
  }

  it('a body of exactly 1 MiB is served', async () => {
    const body = bodyOf(MAX_REQUEST_BODY_BYTES);
    expect(Buffer.byteLength(body)).toBe(1024 * 1024);
    const res = await rawPost(body);
    expect(res.status).toBe(200);
    expect(res.data).toEqual({ __typename: 'Query' });
  });

  it('one byte more: 413 with a JSON error coded BAD_USER_INPUT, and the service still answers', async () => {
    const before = await counts();
    const res = await rawPost(bodyOf(MAX_REQUEST_BODY_BYTES + 1));
    expect(res.status).toBe(413);
    expect(res.contentType).toMatch(/json/);
    expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(res.data ?? null).toBeNull();
    expect(await counts()).toEqual(before);
    for (let i = 0; i < 4; i++) await stillAlive();
  });

  it('an oversize createJob is refused whole and writes nothing', async () => {
    const body = JSON.stringify({ query: CREATE_JOB, variables: { input: summarizeInput('big', { input: { text: 'y'.repeat(2 * 1024 * 1024) } }) } });
    const before = await counts();
    const res = await rawPost(body);
    expect(res.status).toBe(413);
    expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(await counts()).toEqual(before);
    await stillAlive();
  });

  it('an oversize body without Content-Length (chunked) is refused too', async () => {
    const chunk = new TextEncoder().encode(' '.repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(new TextEncoder().encode('{"query": "{ __typename }"'));
        if (sent > MAX_REQUEST_BODY_BYTES * 2) {
          controller.enqueue(new TextEncoder().encode('}'));
          controller.close();
          return;
        }
        controller.enqueue(chunk);
        sent += chunk.byteLength;
      },
    });
    const res = await rawPost(stream, {}, { duplex: 'half' } as RequestInit);
    expect(res.status).toBe(413);
    expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    // The refused upload's connection must not be left open and stuck: the client pool reuses it for
    // one of the next requests, which would then fail (ECONNRESET) after the keep-alive timeout.
    for (let i = 0; i < 4; i++) await stillAlive();
  });
});

describe('authentication', () => {
  const QUERY = '{ jobs { edges { node { id } } } }';
  const badHeaders: [string, Record<string, string>][] = [
    ['no Authorization header', {}],
    ['an empty header', { authorization: '' }],
    ['"Bearer" with no token', { authorization: 'Bearer' }],
    ['"Bearer " and spaces', { authorization: 'Bearer    ' }],
    ['another scheme', { authorization: 'Basic YWxpY2U6c2VjcmV0' }],
    ['no scheme', { authorization: 'oj_abcdef' }],
    ['two tokens', { authorization: 'Bearer oj_a oj_b' }],
    ['an unknown token', { authorization: `Bearer oj_${'A'.repeat(43)}` }],
    ['an overlong token', { authorization: `Bearer ${'x'.repeat(5000)}` }],
  ];

  it.for(badHeaders)('%s: UNAUTHENTICATED for a query and a mutation, nothing written', async ([, headers]) => {
    for (const [query, variables] of [
      [QUERY, {}],
      [CREATE_JOB, { input: summarizeInput('unauthenticated') }],
    ] as const) {
      const before = await counts();
      const res = await fetch(api.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
        body: JSON.stringify({ query, variables }),
      });
      const body = (await res.json()) as GraphQLResponse;
      expect(errorCode({ ...body, status: res.status, headers: res.headers })).toBe('UNAUTHENTICATED');
      expect(body.data ?? null).toBeNull();
      expect(body.errors![0]!.message).toMatch(/Authorization: Bearer/);
      expect(res.status).toBe(401);
      expect(await counts()).toEqual(before);
    }
  });

  it('a valid token with a lower-case scheme is accepted (the scheme is case-insensitive)', async () => {
    const res = await fetch(api.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `bearer ${alice.token}` },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(((await res.json()) as GraphQLResponse).data).toEqual({ __typename: 'Query' });
  });

  it('a GET query with no token is UNAUTHENTICATED too', async () => {
    const res = await fetch(`${api.graphqlUrl}?query=${encodeURIComponent(QUERY)}`, { headers: { accept: 'application/json' } });
    const body = (await res.json()) as GraphQLResponse;
    expect(body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(body.data ?? null).toBeNull();
  });
});

describe('WebSocket authentication (graphql-transport-ws)', () => {
  const clients: Client[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
  });

  function connect(
    connectionParams: Record<string, unknown> | undefined,
    lazy = true,
  ): { client: Client; closed: Promise<{ code: number; reason: string }> } {
    const client = createClient({
      url: api.graphqlUrl.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      connectionParams,
      retryAttempts: 0,
      lazy, // lazy: connects on the first subscription and closes (1000) after the last one
    });
    clients.push(client);
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      client.on('closed', (event) => {
        const e = event as { code: number; reason: string };
        resolve({ code: e.code, reason: e.reason });
      }),
    );
    return { client, closed };
  }

  const EVENTS = 'subscription($id: ID!) { jobEvents(jobId: $id) { seq type jobId } }';

  /** Collects `n` results of one operation, or what it failed with. */
  async function take(client: Client, query: string, variables: Record<string, unknown>, n: number): Promise<{ results: ExecutionResult[]; failure?: unknown }> {
    const results: ExecutionResult[] = [];
    try {
      for await (const result of client.iterate({ query, variables })) {
        results.push(result as ExecutionResult);
        if (results.length >= n) break;
      }
      return { results };
    } catch (failure) {
      return { results, failure };
    }
  }

  it.for([
    ['an unknown token', { authorization: `Bearer oj_${'B'.repeat(43)}` }],
    ['a malformed authorization', { authorization: 'oj_nothing' }],
    ['no authorization', {}],
    ['no connectionParams', undefined],
  ] as const)('%s: the connection is closed with 4403 before any data', async ([, params]) => {
    const job = await newJob(`ws-refused-${randomUUID()}`);
    const { client, closed } = connect(params as Record<string, unknown> | undefined);
    const outcome = await take(client, EVENTS, { id: job.id }, 1);
    expect(outcome.results).toEqual([]);
    expect((outcome.failure as { code?: number }).code).toBe(4403);
    expect((await closed).code).toBe(4403);
  });

  it('a good token connects, and its subscription streams the job’s events', async () => {
    const job = await newJob('ws-good');
    const { client } = connect({ authorization: `Bearer ${alice.token}` });
    const outcome = await take(client, EVENTS, { id: job.id }, 3);
    expect(outcome.failure).toBeUndefined();
    expect(outcome.results.map((r) => (r.data as { jobEvents: { seq: number; type: string } }).jobEvents)).toEqual([
      { seq: 1, type: 'JOB_CREATED', jobId: job.id },
      { seq: 2, type: 'ATTEMPT_STARTED', jobId: job.id },
      { seq: 3, type: 'ATTEMPT_RUNNING', jobId: job.id },
    ]);
  });

  it('a bare token (no Bearer scheme) in connectionParams is accepted too', async () => {
    const job = await newJob('ws-bare');
    const { client } = connect({ authorization: alice.token });
    const outcome = await take(client, EVENTS, { id: job.id }, 1);
    expect(outcome.failure).toBeUndefined();
    expect(outcome.results).toHaveLength(1);
  });

  it('on an authenticated socket, another owner’s job and a bad id are NOT_FOUND, and bad documents are BAD_USER_INPUT, without closing the socket', async () => {
    const job = await newJob('ws-other-owner');
    const { client } = connect({ authorization: `Bearer ${bob.token}` }, false);
    let closedCode: number | undefined;
    let connections = 0;
    client.on('closed', (e) => (closedCode = (e as { code: number }).code));
    client.on('connected', () => connections++);
    for (const id of [job.id, 'not-a-uuid']) {
      const outcome = await take(client, EVENTS, { id }, 1);
      const errors = (outcome.results[0]?.errors ?? outcome.failure) as GqlError[];
      expect(errors.map((e) => e.extensions?.code)).toEqual(['NOT_FOUND']);
    }
    for (const [query, variables] of [
      ['subscription { jobEvents(', {}], // syntax error
      ['subscription { nope }', {}], // unknown field
      [EVENTS, { id: { not: 'an id' } }], // wrong variable type
      ['subscription($id: ID!) { jobEvents(jobId: $id, afterSeq: -1) { seq } }', { id: job.id }],
      ['{ __type(name: "Job") { fields { type { ofType { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } }', {}],
    ] as const) {
      const outcome = await take(client, query, variables, 1);
      const errors = (outcome.results[0]?.errors ?? outcome.failure) as GqlError[];
      expect(Array.isArray(errors), `${query}: ${JSON.stringify(outcome)}`).toBe(true);
      expect(errors.length).toBeGreaterThan(0);
      for (const e of errors) expect(e.extensions?.code, `${query}: ${JSON.stringify(e)}`).toBe('BAD_USER_INPUT');
    }
    // The socket survived all of it: bob's own job still streams on it.
    const own = await newJob('ws-own', bob.token);
    const outcome = await take(client, EVENTS, { id: own.id }, 1);
    expect(outcome.failure).toBeUndefined();
    expect(outcome.results[0]?.data).toEqual({ jobEvents: { seq: 1, type: 'JOB_CREATED', jobId: own.id } });
    expect(closedCode).toBeUndefined();
    expect(connections).toBe(1);
  });
});

describe('authorization', () => {
  async function snapshot(jobId: string) {
    const [{ rows: jobs }, { rows: attempts }] = await Promise.all([
      db.pool.query('SELECT * FROM jobs WHERE id = $1', [jobId]),
      db.pool.query('SELECT * FROM attempts WHERE job_id = $1 ORDER BY number', [jobId]),
    ]);
    return { jobs, attempts, counts: await counts() };
  }

  it('an owner calling cancelAttempt or reportAttemptResult gets FORBIDDEN, and nothing changes', async () => {
    const job = await newJob('owner-forbidden');
    const attemptId = job.attempts[0].id;
    const before = await snapshot(job.id);
    for (const [query, variables] of [
      [CANCEL_ATTEMPT, { attemptId, reason: 'I changed my mind' }],
      [REPORT, { attemptId, result: GOOD_SUMMARY }],
      [REPORT, { attemptId, error: 'provider said no' }],
      [CANCEL_ATTEMPT, { attemptId: randomUUID(), reason: 'not even mine' }], // no existence oracle either
    ] as const) {
      const error = await refused(alice.token, query, variables, 'FORBIDDEN');
      expect(error.message).toMatch(/operator/);
    }
    expect(await snapshot(job.id)).toEqual(before);
    expect(dataOf(await gql(api.graphqlUrl, alice.token, JOB, { id: job.id })).job).toMatchObject({ status: 'RUNNING', version: 1 });
  });

  it('an operator may call them on any owner’s attempts', async () => {
    const toWin = await newJob('operator-report');
    const report = dataOf(await gql(api.graphqlUrl, operator.token, REPORT, { attemptId: toWin.attempts[0].id, result: GOOD_SUMMARY }));
    expect(report.reportAttemptResult).toMatchObject({
      outcome: 'WON',
      attempt: { id: toWin.attempts[0].id, state: 'SUCCEEDED' },
      job: { id: toWin.id, status: 'SUCCEEDED', version: 2, result: GOOD_SUMMARY },
    });
    const toCancel = await newJob('operator-cancel');
    const cancelled = dataOf(await gql(api.graphqlUrl, operator.token, CANCEL_ATTEMPT, { attemptId: toCancel.attempts[0].id, reason: 'stuck' }));
    expect(cancelled.cancelAttempt).toMatchObject({ id: toCancel.attempts[0].id, state: 'CANCELLED' });
    expect(dataOf(await gql(api.graphqlUrl, alice.token, JOB, { id: toCancel.id })).job).toMatchObject({ status: 'PENDING', version: 1 });
  });

  it('an operator reads another owner’s job with job(id)', async () => {
    const job = await newJob('operator-reads');
    const res = dataOf(await gql(api.graphqlUrl, operator.token, JOB, { id: job.id }));
    expect(res.job).toMatchObject({ id: job.id, status: 'RUNNING' });
  });

  it('another owner’s job: null from job(id), NOT_FOUND from retryJob and cancelJob, exactly as for an id that does not exist', async () => {
    const job = await newJob('alice-only');
    expect(dataOf(await gql(api.graphqlUrl, bob.token, JOB, { id: job.id })).job).toBeNull();
    const missing = randomUUID();
    for (const query of [RETRY_JOB, CANCEL_JOB]) {
      const theirs = await refused(bob.token, query, { jobId: job.id }, 'NOT_FOUND');
      const nobodys = await refused(bob.token, query, { jobId: missing }, 'NOT_FOUND');
      expect(theirs.message.replace(job.id, 'ID')).toBe(nobodys.message.replace(missing, 'ID'));
    }
    const bobsJobs = dataOf(await gql(api.graphqlUrl, bob.token, '{ jobs(first: 100) { edges { node { id } } } }')).jobs.edges;
    expect(bobsJobs.map((e: { node: { id: string } }) => e.node.id)).not.toContain(job.id);
    // Untouched: still alice's, still running.
    expect(dataOf(await gql(api.graphqlUrl, alice.token, JOB, { id: job.id })).job).toMatchObject({ status: 'RUNNING', version: 1 });
  });

  const notIds = ['not-a-uuid', '', '123', "1'; DROP TABLE jobs; --", 'x'.repeat(10_000), '12345678-1234-1234-1234-1234567890123'];

  it('an id that is not a UUID: job(id) answers null, not an error', async () => {
    for (const id of notIds) {
      const res = await gql(api.graphqlUrl, alice.token, JOB, { id });
      expect(res.errors, id).toBeUndefined();
      expect(res.data).toEqual({ job: null });
    }
    const literal = await gql(api.graphqlUrl, operator.token, '{ job(id: 42) { id } }');
    expect(literal.errors).toBeUndefined();
    expect(literal.data).toEqual({ job: null });
  });

  it('an id that is not a UUID: NOT_FOUND from every mutation, not INTERNAL_SERVER_ERROR', async () => {
    for (const id of notIds) {
      await refused(alice.token, RETRY_JOB, { jobId: id }, 'NOT_FOUND');
      await refused(alice.token, CANCEL_JOB, { jobId: id }, 'NOT_FOUND');
      await refused(operator.token, CANCEL_ATTEMPT, { attemptId: id, reason: 'x' }, 'NOT_FOUND');
      await refused(operator.token, REPORT, { attemptId: id, result: GOOD_SUMMARY }, 'NOT_FOUND');
    }
  });

  it('operator free text the database cannot store (U+0000) is BAD_USER_INPUT naming the argument, and changes nothing', async () => {
    const job = await newJob('operator-text');
    const attemptId = job.attempts[0].id;
    const before = await snapshot(job.id);
    expect((await refused(operator.token, CANCEL_ATTEMPT, { attemptId, reason: 'stuck\u0000' }, 'BAD_USER_INPUT')).extensions?.field).toBe('reason');
    expect((await refused(operator.token, REPORT, { attemptId, error: 'boom\u0000' }, 'BAD_USER_INPUT')).extensions?.field).toBe('error');
    const result = await refused(operator.token, REPORT, { attemptId, result: { ...GOOD_SUMMARY, summary: 'A fox\u0000' } }, 'BAD_USER_INPUT');
    expect(result.message).toContain('summary');
    expect(await snapshot(job.id)).toEqual(before);
  });
});

describe('malformed GraphQL requests are BAD_USER_INPUT', () => {
  it.for([
    ['a syntax error', '{ jobs { ', undefined],
    ['an empty document', '', undefined],
    ['only a comment', '# nothing here', undefined],
    ['an unknown field', '{ jobs { edges { node { id secret } } } }', undefined],
    ['an unknown root field', '{ nope }', undefined],
    ['an unknown argument', '{ jobs(owner: "bob") { edges { cursor } } }', undefined],
    ['an unknown type', 'query($x: Nope) { __typename }', { x: 1 }],
    ['a wrong literal type', '{ job(id: { a: 1 }) { id } }', undefined],
    ['a missing required argument', '{ job { id } }', undefined],
    ['a missing selection set', '{ jobs }', undefined],
    ['an undeclared variable', '{ job(id: $id) { id } }', { id: 'x' }],
    ['a wrong variable type (Int)', 'query($first: Int) { jobs(first: $first) { edges { cursor } } }', { first: 'ten' }],
    ['a wrong variable type (ID)', 'query($id: ID!) { job(id: $id) { id } }', { id: { a: 1 } }],
    ['a missing required variable', 'query($id: ID!) { job(id: $id) { id } }', {}],
    ['a null required variable', 'query($id: ID!) { job(id: $id) { id } }', { id: null }],
    ['a wrong enum value', 'query($s: JobStatus) { jobs(status: $s) { edges { cursor } } }', { s: 'DONE' }],
    ['two anonymous operations', '{ __typename } { __typename }', undefined],
    ['an unknown operationName', 'query A { __typename } query B { __typename }', undefined],
    ['first out of range', '{ jobs(first: 0) { edges { cursor } } }', undefined],
    ['first above the page size', '{ jobs(first: 101) { edges { cursor } } }', undefined],
    ['a cursor this API did not give out', '{ jobs(after: "bm90IGEgY3Vyc29y") { edges { cursor } } }', undefined],
  ] as const)('%s', async ([, query, variables]) => {
    const res = await gql(api.graphqlUrl, alice.token, query, variables as Record<string, unknown> | undefined);
    expectBadRequest(res);
  });

  it('a query deeper than the armor limit (8) is refused; depth 8 is served', async () => {
    const nest = (depth: number) => {
      // __type (1) > fields (2) > type (3) > ofType × (depth - 4) > name (depth)
      let inner = 'name';
      for (let i = 0; i < depth - 4; i++) inner = `ofType { ${inner} }`;
      return `{ __type(name: "Job") { fields { type { ${inner} } } } }`;
    };
    const ok = await gql(api.graphqlUrl, alice.token, nest(8));
    expect(ok.errors).toBeUndefined();
    expect(ok.data?.__type?.fields?.length).toBeGreaterThan(0);
    const deep = await gql(api.graphqlUrl, alice.token, nest(9));
    expectBadRequest(deep);
    expect(deep.errors![0]!.message).toMatch(/depth/i);
    expect(deep.data ?? null).toBeNull();
  });

  it('HTTP-level mistakes: invalid JSON, non-object variables, no query, a mutation over GET', async () => {
    for (const [body, status] of [
      ['{"query": ', 400],
      ['not json at all', 400],
      [JSON.stringify({ query: '{ __typename }', variables: [1, 2] }), 400],
      [JSON.stringify({ query: '{ __typename }', variables: 'x' }), 400],
      [JSON.stringify({ query: 42 }), 400],
      [JSON.stringify({}), undefined],
    ] as const) {
      const res = await rawPost(body);
      expectBadRequest(res);
      if (status) expect(res.status).toBe(status);
      expect(res.text).not.toMatch(/\n\s+at /); // no stack
    }
    const before = await counts();
    const get = await fetch(
      `${api.graphqlUrl}?query=${encodeURIComponent('mutation($i: CreateJobInput!) { createJob(input: $i) { replayed } }')}&variables=${encodeURIComponent(JSON.stringify({ i: summarizeInput('via-get') }))}`,
      { headers: { authorization: `Bearer ${alice.token}`, accept: 'application/json' } },
    );
    expect(get.status).toBe(405);
    expectBadRequest({ status: get.status, ...((await get.json()) as { errors?: GqlError[] }) });
    expect(await counts()).toEqual(before);
    await stillAlive();
  });
});

describe('unexpected errors are masked', () => {
  let broken: TestDatabase;
  let brokenApi: Instance;
  let token: string;

  beforeAll(async () => {
    // A throwaway database whose events table goes missing under a running instance.
    broken = await createTestDatabase('masking');
    brokenApi = await startInstance(broken.url, { sweepDeadlines: false });
    token = (await makeToken(broken.pool, 'carol')).token;
    await broken.pool.query('ALTER TABLE job_events RENAME TO job_events_gone');
  });

  it('a database failure answers INTERNAL_SERVER_ERROR with an error id, and no stack, SQL or table name', async () => {
    const res = await fetch(brokenApi.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: CREATE_JOB, variables: { input: summarizeInput('doomed') } }),
    });
    const text = await res.text();
    const body = JSON.parse(text) as GraphQLResponse;
    expect(body.errors).toHaveLength(1);
    const error = body.errors![0]!;
    expect(error.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
    expect(Object.keys(error.extensions!).sort()).toEqual(['code', 'errorId']);
    expect(error.message).toContain(error.extensions!.errorId);
    for (const leak of [/job_events/i, /relation/i, /\bINSERT\b/i, /\bSELECT\b/i, /\n\s+at /, /\.ts:\d+/, /stack/i, /postgres/i]) {
      expect(text).not.toMatch(leak);
    }
    // And nothing half-written: the statement failed as a whole.
    const { rows } = await broken.pool.query('SELECT (SELECT count(*)::int FROM jobs) AS jobs, (SELECT count(*)::int FROM idempotency_keys) AS keys');
    expect(rows[0]).toEqual({ jobs: 0, keys: 0 });
  });
});
