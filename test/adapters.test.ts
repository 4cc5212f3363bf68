// Provider adapters against the fake providers, in two layers.
// A. The adapters alone (openaiAdapter chat and responses, anthropicAdapter), called as the runner calls
//    them, with a real AbortSignal that fires at the deadline: how each thing a provider can do on the
//    wire becomes a CallOutcome — result, failed (definitive), unknown (nobody knows) or pending.
// B. The whole service: jobs created over GraphQL on providers of kind openai/anthropic pointing at the
//    fakes, sent by the real runner, settled in real Postgres: the attempt's states and events, usage,
//    UNKNOWN (never FAILED) when the provider may have done the work, fallbacks after a contract breach,
//    and exactly one request per attempt (counted by Idempotency-Key = attempt id).
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Config, ProviderConfig } from '../config.ts';
import { anthropicAdapter } from '../providers/adapters/anthropic.ts';
import { openaiAdapter } from '../providers/adapters/openai.ts';
import type { ProviderAdapter } from '../providers/adapters/types.ts';
import { certifyProvider } from '../providers/certification.ts';
import { OPERATIONS } from '../providers/operations/index.ts';
import { checkPromptFits } from '../providers/tokenizers.ts';
import { startAnthropicFake, type AnthropicFake } from './fakes/anthropicFake.ts';
import { startOpenAIFake, type OpenAIFake } from './fakes/openaiFake.ts';
import type { Endpoint, ScriptEntry } from './fakes/script.ts';
import type { RecordedRequest } from './fakes/server.ts';
import { CLASSIFY_INPUT, SUMMARIZE_INPUT, callToEnd, closedPort, eventually, onejobRespond, prepareCall, type PreparedCall } from './helpers/adapterCalls.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { CREATE_JOB, JOB, dataOf, gql } from './helpers/graphql.ts';
import { makeToken, startInstance, type Instance, type TestToken } from './helpers/instance.ts';

type OpenAIConfig = Extract<ProviderConfig, { kind: 'openai' }>;
type AnthropicConfig = Extract<ProviderConfig, { kind: 'anthropic' }>;

const OPENAI_KEY = 'test-openai-key';
const ANTHROPIC_KEY = 'test-anthropic-key';
const OPENAI_ENV = { ONEJOB_TEST_OA_KEY: OPENAI_KEY };
const ANTHROPIC_ENV = { ONEJOB_TEST_AN_KEY: ANTHROPIC_KEY };

const openaiConfig = (baseUrl: string, api: 'chat' | 'responses') =>
  ProviderConfig.parse({ kind: 'openai', api, baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: 'ONEJOB_TEST_OA_KEY' }) as OpenAIConfig;
const anthropicConfig = (baseUrl: string) =>
  ProviderConfig.parse({ kind: 'anthropic', baseUrl, model: 'claude-sonnet-4-5', apiKeyEnv: 'ONEJOB_TEST_AN_KEY' }) as AnthropicConfig;

/** What the matrix needs of either fake. */
type AnyFake = Pick<OpenAIFake, 'baseUrl' | 'requests' | 'script' | 'pendingScript' | 'until' | 'stop'>;

interface Flavour {
  name: string;
  /** The endpoint that makes the model work: the one request per attempt. */
  generation: Endpoint;
  start(): Promise<AnyFake>;
  /** The adapter on `baseUrl` (default the fake's), with these environment variables. */
  adapter(baseUrl: string, env?: NodeJS.ProcessEnv): ProviderAdapter;
  /** The base URL of a provider on this port, as the config writes it. */
  baseUrlOn(port: number): string;
  env: NodeJS.ProcessEnv;
}

const FLAVOURS: Flavour[] = [
  {
    name: 'openai chat',
    generation: 'chat.completions',
    start: () => startOpenAIFake({ respond: onejobRespond }),
    adapter: (baseUrl, env = OPENAI_ENV) => openaiAdapter(openaiConfig(baseUrl, 'chat'), env),
    baseUrlOn: (port) => `http://127.0.0.1:${port}/v1`,
    env: OPENAI_ENV,
  },
  {
    name: 'openai responses (background)',
    generation: 'responses.create',
    // Finishes a background response on its first retrieve, as its create's behaviour says.
    start: () => startOpenAIFake({ respond: onejobRespond, settleAfterRetrieves: 1 }),
    adapter: (baseUrl, env = OPENAI_ENV) => openaiAdapter(openaiConfig(baseUrl, 'responses'), env),
    baseUrlOn: (port) => `http://127.0.0.1:${port}/v1`,
    env: OPENAI_ENV,
  },
  {
    name: 'anthropic',
    generation: 'messages',
    start: () => startAnthropicFake({ respond: onejobRespond }),
    adapter: (baseUrl, env = ANTHROPIC_ENV) => anthropicAdapter(anthropicConfig(baseUrl), env),
    baseUrlOn: (port) => `http://127.0.0.1:${port}`,
    env: ANTHROPIC_ENV,
  },
];

const GOOD = { summary: 'A fox runs into a forest.', keyPoints: ['a fox jumps', 'it runs away'] };

// ------------------------------------------------------------------------------------------------
// A. Adapter level
// ------------------------------------------------------------------------------------------------

describe.each(FLAVOURS)('adapter: $name', (flavour) => {
  let fake: AnyFake;
  let adapter: ProviderAdapter;
  let calls: PreparedCall[] = [];

  beforeAll(async () => {
    fake = await flavour.start();
    adapter = flavour.adapter(fake.baseUrl);
  });
  afterAll(() => fake.stop());
  afterEach(() => {
    for (const c of calls) c.dispose();
    calls = [];
    expect(fake.pendingScript, 'every scripted behaviour was used').toBe(0);
  });

  /** A fresh attempt id and call; `script` entries are keyed to that attempt. */
  function attempt(opts: { operation?: 'summarize' | 'classify'; deadlineMs?: number } = {}) {
    const call = prepareCall({ attemptId: randomUUID(), ...opts });
    calls.push(call);
    const id = call.request.attemptId;
    return {
      ...call,
      id,
      script: (...entries: ScriptEntry[]) => fake.script(...entries.map((e) => ({ ...e, idempotencyKey: id }))),
      /** The generation requests this attempt sent. */
      sent: () => fake.requests.filter((r) => r.endpoint === flavour.generation && r.idempotencyKey === id),
      /** Every request the fake got under this attempt's key (polls and cancels carry none). */
      keyed: () => fake.requests.filter((r) => r.idempotencyKey === id),
      run: () => callToEnd(adapter, call.request),
    };
  }

  it('success: the output parsed, usage, the provider’s id; one request with the attempt id as Idempotency-Key', async () => {
    const a = attempt();
    a.script({ kind: 'ok', output: GOOD, usage: { inputTokens: 300, outputTokens: 40 } });
    const outcome = await a.run();
    expect(a.sent()).toHaveLength(1);
    expect(a.keyed()).toHaveLength(1);
    const [rec] = a.sent();
    expect(rec!.providerId).toBeTruthy();
    expect(outcome).toEqual({ kind: 'result', output: GOOD, usageTokens: 340, providerRequestId: rec!.providerId });
    expect(a.accepted).toEqual([rec!.providerId]);
  });

  it('4xx: failed with the provider’s own message, nothing accepted', async () => {
    const a = attempt();
    a.script({ kind: 'status', status: 400, message: 'max_tokens: 999999 is more than this model allows' });
    const outcome = await a.run();
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/^HTTP 400: max_tokens: 999999 is more than this model allows/);
    expect(a.accepted).toEqual([]);
    expect(a.sent()).toHaveLength(1);
  });

  it('a wrong API key: failed with the provider’s authentication message', async () => {
    const a = attempt();
    const wrong = flavour.adapter(fake.baseUrl, Object.fromEntries(Object.keys(flavour.env).map((k) => [k, 'not-the-key'])));
    const outcome = await wrong.call(a.request);
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/^HTTP 401: .*(API key|x-api-key)/i);
    expect(a.sent()[0]!.answer).toBe('unauthorized');
  });

  it('429 with Retry-After 1 and a far deadline: waits, sends again under the same key, succeeds', async () => {
    const a = attempt({ deadlineMs: 30_000 });
    a.script({ kind: 'status', status: 429, retryAfterSeconds: 1 }, { kind: 'ok', output: GOOD });
    const started = Date.now();
    const outcome = await a.run();
    expect(outcome).toMatchObject({ kind: 'result', output: GOOD });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    const sent = a.sent();
    expect(sent.map((r) => r.status)).toEqual([429, 200]);
    expect(sent.map((r) => r.idempotencyKey)).toEqual([a.id, a.id]);
    expect(a.accepted).toHaveLength(1);
  });

  it('429 whose Retry-After does not fit before the deadline: failed at once, not sent again', async () => {
    const a = attempt({ deadlineMs: 2_000 });
    a.script({ kind: 'status', status: 429, retryAfterSeconds: 5 });
    const started = Date.now();
    const outcome = await a.run();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/rate limited.*Retry-After 5 s does not fit before the deadline/);
    expect(a.sent()).toHaveLength(1);
  });

  it('timeout: the provider never answers, the signal aborts at the deadline → unknown', async () => {
    const a = attempt({ deadlineMs: 300 });
    a.script({ kind: 'hang' });
    const started = Date.now();
    const outcome = await a.run();
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(outcome.kind).toBe('unknown');
    expect((outcome as { reason: string }).reason).toMatch(/no answer before the deadline/);
    await fake.until(() => a.sent()[0]?.closedByClient === true);
    expect(a.sent()).toHaveLength(1);
    expect(a.accepted).toEqual([]);
  });

  it('connection reset after the request was sent → unknown', async () => {
    const a = attempt();
    a.script({ kind: 'resetAfterReceive' });
    const outcome = await a.run();
    expect(outcome.kind).toBe('unknown');
    expect((outcome as { reason: string }).reason).toMatch(/connection failed after the request was sent|cut off/);
    expect(a.sent()).toEqual([expect.objectContaining({ reset: true })]);
    expect(a.accepted).toEqual([]);
  });

  it.each([502, 504, 500])('HTTP %i: the model may have run → unknown', async (status) => {
    const a = attempt();
    a.script({ kind: 'status', status, ...(status === 502 ? { rawBody: '<html><body>502 Bad Gateway</body></html>' } : {}) });
    const outcome = await a.run();
    expect(outcome.kind).toBe('unknown');
    expect((outcome as { reason: string }).reason).toMatch(new RegExp(`^HTTP ${status}: `));
    expect(a.sent()).toHaveLength(1);
  });

  it.each([503, 529])('HTTP %i: refused before any work → failed', async (status) => {
    const a = attempt();
    a.script({ kind: 'status', status });
    const outcome = await a.run();
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(new RegExp(`^HTTP ${status}: `));
    expect(a.sent()).toHaveLength(1);
  });

  it('connection refused (nothing listens): failed, the request surely never left', async () => {
    const a = attempt();
    const nowhere = flavour.adapter(flavour.baseUrlOn(await closedPort()));
    const outcome = await nowhere.call(a.request);
    expect(outcome).toEqual({ kind: 'failed', reason: expect.stringMatching(/could not reach the provider \(ECONNREFUSED\)/) });
    expect(a.accepted).toEqual([]);
  });

  it('malformed JSON: failed, and the reason says malformed JSON', async () => {
    const a = attempt();
    a.script({ kind: 'malformedJson' });
    const outcome = await a.run();
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/malformed JSON/);
    expect(a.sent()).toHaveLength(1);
  });

  it('output cut off at the token limit: failed, never a partial result', async () => {
    const a = attempt();
    a.script({ kind: 'malformedJson', truncated: true });
    const outcome = await a.run();
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/cut off at the token limit|incomplete output: max_output_tokens/);
  });

  it('refusal: failed', async () => {
    const a = attempt();
    a.script({ kind: 'refusal', message: 'I will not summarize this.' });
    const outcome = await a.run();
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/the model refused/);
  });

  it('the API key variable is not set: failed without sending anything', async () => {
    const a = attempt();
    const before = fake.requests.length;
    const keyless = flavour.adapter(fake.baseUrl, {});
    const outcome = await keyless.call(a.request);
    expect(outcome).toEqual({ kind: 'failed', reason: `the API key variable ${Object.keys(flavour.env)[0]} is not set` });
    expect(fake.requests.length).toBe(before);
    expect(a.accepted).toEqual([]);
  });

  it('a hallucinated key comes back as a result: the contract check is the service’s job', async () => {
    const a = attempt();
    a.script({ kind: 'hallucinatedKey', key: 'reasoning' });
    const outcome = await a.run();
    expect(outcome.kind).toBe('result');
    expect((outcome as { output: Record<string, unknown> }).output).toHaveProperty('reasoning');
    expect((outcome as { output: Record<string, unknown> }).output).toHaveProperty('summary');
  });

  it('a wrong label comes back as a result too', async () => {
    const good = attempt({ operation: 'classify' });
    expect(await good.run()).toMatchObject({ kind: 'result', output: { label: 'dogs' } });
    const a = attempt({ operation: 'classify' });
    a.script({ kind: 'wrongLabel', label: 'fish' });
    expect(await a.run()).toMatchObject({ kind: 'result', output: { label: 'fish' } });
    expect(CLASSIFY_INPUT.labels).not.toContain('fish');
  });
});

describe('adapter: what goes on the wire', () => {
  let openai: OpenAIFake;
  let anthropic: AnthropicFake;
  const calls: PreparedCall[] = [];
  beforeAll(async () => {
    openai = await startOpenAIFake({ respond: onejobRespond });
    anthropic = await startAnthropicFake({ respond: onejobRespond });
  });
  afterAll(async () => {
    for (const c of calls) c.dispose();
    await Promise.all([openai.stop(), anthropic.stop()]);
  });
  const prepared = () => {
    const c = prepareCall({ attemptId: randomUUID() });
    calls.push(c);
    return c;
  };

  it('openai chat: model, temperature 0, the strict json_schema, the prompt, Bearer key, Idempotency-Key', async () => {
    const c = prepared();
    expect((await openaiAdapter(openaiConfig(openai.baseUrl, 'chat'), OPENAI_ENV).call(c.request)).kind).toBe('result');
    const rec = openai.requests.find((r) => r.idempotencyKey === c.request.attemptId)!;
    expect(rec).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
    expect(rec.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(rec.headers['idempotency-key']).toBe(c.request.attemptId);
    expect(rec.body).toMatchObject({
      model: 'gpt-4.1-mini',
      temperature: 0,
      max_completion_tokens: c.request.maxOutputTokens,
      messages: [
        { role: 'system', content: c.request.prompt.system },
        { role: 'user', content: c.request.prompt.user },
      ],
      response_format: { type: 'json_schema', json_schema: { name: 'summarize', strict: true, schema: c.request.outputSchema } },
    });
  });

  it('openai responses: background, temperature 0, the strict json_schema as text.format, Bearer key, Idempotency-Key', async () => {
    const c = prepared();
    expect((await openaiAdapter(openaiConfig(openai.baseUrl, 'responses'), OPENAI_ENV).call(c.request)).kind).toBe('pending');
    const rec = openai.requests.find((r) => r.idempotencyKey === c.request.attemptId)!;
    expect(rec).toMatchObject({ method: 'POST', path: '/v1/responses' });
    expect(rec.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(rec.body).toMatchObject({
      model: 'gpt-4.1-mini',
      background: true,
      temperature: 0,
      instructions: c.request.prompt.system,
      input: c.request.prompt.user,
      text: { format: { type: 'json_schema', name: 'summarize', strict: true, schema: c.request.outputSchema } },
    });
  });

  it('anthropic: model, temperature 0, the schema as the one forced tool, x-api-key, version, Idempotency-Key', async () => {
    const c = prepared();
    expect((await anthropicAdapter(anthropicConfig(anthropic.baseUrl), ANTHROPIC_ENV).call(c.request)).kind).toBe('result');
    const rec = anthropic.requests.find((r) => r.idempotencyKey === c.request.attemptId)!;
    expect(rec).toMatchObject({ method: 'POST', path: '/v1/messages' });
    expect(rec.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(rec.headers['anthropic-version']).toBe('2023-06-01');
    expect(rec.headers.authorization).toBeUndefined();
    expect(rec.body).toMatchObject({
      model: 'claude-sonnet-4-5',
      temperature: 0,
      max_tokens: c.request.maxOutputTokens,
      system: c.request.prompt.system,
      messages: [{ role: 'user', content: c.request.prompt.user }],
      tools: [{ name: 'summarize', input_schema: c.request.outputSchema }],
      tool_choice: { type: 'tool', name: 'summarize' },
    });
  });
});

describe('adapter: openai responses in background mode, step by step', () => {
  let fake: OpenAIFake;
  let adapter: ProviderAdapter;
  const calls: PreparedCall[] = [];
  beforeAll(async () => {
    fake = await startOpenAIFake({ respond: onejobRespond }); // finishes a response only when the test says so
    adapter = openaiAdapter(openaiConfig(fake.baseUrl, 'responses'), OPENAI_ENV);
  });
  afterAll(async () => {
    for (const c of calls) c.dispose();
    await fake.stop();
  });

  async function created() {
    const c = prepareCall({ attemptId: randomUUID() });
    calls.push(c);
    const outcome = await adapter.call(c.request);
    const rec = fake.requests.find((r) => r.idempotencyKey === c.request.attemptId && r.endpoint === 'responses.create')!;
    expect(rec.providerId).toMatch(/^resp_/);
    expect(outcome).toEqual({ kind: 'pending', providerRequestId: rec.providerId });
    expect(c.accepted).toEqual([rec.providerId]);
    const q = { attemptId: c.request.attemptId, providerRequestId: rec.providerId! };
    return { c, id: rec.providerId!, q, retrieve: () => adapter.retrieve!(q, c.request.signal) };
  }

  it('the call answers pending with the response id; retrieve answers pending, then the result', async () => {
    const { id, retrieve } = await created();
    expect(await retrieve()).toEqual({ kind: 'pending', providerRequestId: id }); // queued
    fake.responses.start(id);
    expect(await retrieve()).toEqual({ kind: 'pending', providerRequestId: id }); // in_progress
    fake.responses.complete(id, { kind: 'ok', output: GOOD, usage: { inputTokens: 50, outputTokens: 7 } });
    expect(await retrieve()).toEqual({ kind: 'result', output: GOOD, usageTokens: 57, providerRequestId: id });
    const gets = fake.requests.filter((r) => r.endpoint === 'responses.retrieve' && r.providerId === id);
    expect(gets).toHaveLength(3);
    // A poll is not the request that makes the model work: it carries no Idempotency-Key of its own.
    for (const g of gets) expect(g.idempotencyKey).toBeUndefined();
    expect(gets[0]!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
  });

  it('retrieve answers failed with the provider’s reason when the response failed', async () => {
    const { id, retrieve } = await created();
    fake.responses.fail(id, { message: 'The model crashed halfway.' });
    expect(await retrieve()).toEqual({
      kind: 'failed',
      reason: 'the provider failed the request: The model crashed halfway.',
      providerRequestId: id,
    });
  });

  it('retrieve of a completed response with a contract breach is still a result; broken JSON is failed', async () => {
    const a = await created();
    fake.responses.complete(a.id, { kind: 'hallucinatedKey' });
    expect(await a.retrieve()).toMatchObject({ kind: 'result', output: { reasoning: expect.any(String) } });
    const b = await created();
    fake.responses.complete(b.id, { kind: 'malformedJson' });
    expect(await b.retrieve()).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/malformed JSON/) });
  });

  it('cancel moves the response to cancelled; retrieve then answers failed', async () => {
    const { c, id, q, retrieve } = await created();
    fake.responses.start(id);
    await adapter.cancel!(q, c.request.signal);
    expect(fake.responses.get(id).status).toBe('cancelled');
    const cancel = fake.requests.find((r) => r.endpoint === 'responses.cancel' && r.providerId === id)!;
    expect(cancel.status).toBe(200);
    // Not under the create's Idempotency-Key: an idempotency layer would replay the create instead.
    expect(cancel.idempotencyKey).toBeUndefined();
    expect(await retrieve()).toEqual({ kind: 'failed', reason: 'the request was cancelled at the provider', providerRequestId: id });
  });

  it('retrieve cannot tell without an id, or for an id the provider does not know: unknown', async () => {
    const signal = AbortSignal.timeout(5_000);
    expect((await adapter.retrieve!({ attemptId: randomUUID() }, signal)).kind).toBe('unknown');
    expect(await adapter.retrieve!({ attemptId: randomUUID(), providerRequestId: 'resp_nope' }, signal)).toMatchObject({
      kind: 'unknown',
      reason: expect.stringMatching(/HTTP 404/),
    });
  });
});

// ------------------------------------------------------------------------------------------------
// B. End to end through the service
// ------------------------------------------------------------------------------------------------

describe('end to end: jobs on openai and anthropic providers', () => {
  const OA_ENV = 'ONEJOB_TEST_E2E_OPENAI_KEY';
  const AN_ENV = 'ONEJOB_TEST_E2E_ANTHROPIC_KEY';
  let db: TestDatabase;
  let api: Instance;
  let owner: TestToken;
  let gpt: OpenAIFake; // primary openai provider
  let gptBackup: OpenAIFake; // the fallback, certified in beforeAll
  let gptBg: OpenAIFake; // background mode
  let claude: AnthropicFake;
  let keyCounter = 0;

  beforeAll(async () => {
    db = await createTestDatabase('adapters');
    [gpt, gptBackup, gptBg, claude] = await Promise.all([
      startOpenAIFake({ apiKey: 'e2e-openai', respond: onejobRespond }),
      startOpenAIFake({ apiKey: 'e2e-openai', respond: onejobRespond }),
      startOpenAIFake({ apiKey: 'e2e-openai', respond: onejobRespond, settleAfterRetrieves: 2 }),
      startAnthropicFake({ apiKey: 'e2e-anthropic', respond: onejobRespond }),
    ]);
    process.env[OA_ENV] = 'e2e-openai';
    process.env[AN_ENV] = 'e2e-anthropic';
    const config = Config.parse({
      providers: {
        gpt: { kind: 'openai', baseUrl: gpt.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: OA_ENV, timeoutMs: 30_000 },
        'gpt-backup': { kind: 'openai', baseUrl: gptBackup.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: OA_ENV, timeoutMs: 30_000 },
        'gpt-uncertified': { kind: 'openai', baseUrl: gptBackup.baseUrl, model: 'gpt-4o-mini', apiKeyEnv: OA_ENV, timeoutMs: 30_000 },
        'gpt-bg': { kind: 'openai', api: 'responses', baseUrl: gptBg.baseUrl, model: 'gpt-4.1-mini', apiKeyEnv: OA_ENV, timeoutMs: 30_000 },
        claude: { kind: 'anthropic', baseUrl: claude.baseUrl, model: 'claude-sonnet-4-5', apiKeyEnv: AN_ENV, timeoutMs: 30_000 },
        backup: { kind: 'manual', timeoutMs: 30_000 },
      },
    });
    // The runner counts a prompt's tokens before sending it; building a tokenizer the first time takes up
    // to a second, which would eat a 300 ms attempt's whole budget. Build both now.
    const prompt = OPERATIONS.get('summarize')!.prompt.render(SUMMARIZE_INPUT);
    checkPromptFits('openai', 'gpt-4.1-mini', prompt, 4096, undefined);
    checkPromptFits('anthropic', 'claude-sonnet-4-5', prompt, 4096, undefined);
    api = await startInstance(db.url, { config });
    owner = await makeToken(db.pool, 'adapters-owner');
    const certs = await certifyProvider(api.app.core, 'gpt-backup', ['summarize']);
    expect(certs).toMatchObject([{ passed: true, failures: [] }]);
  });
  afterAll(async () => {
    await api?.stop();
    await Promise.all([gpt, gptBackup, gptBg, claude].map((f) => f?.stop()));
    delete process.env[OA_ENV];
    delete process.env[AN_ENV];
  });
  afterEach(() => {
    for (const f of [gpt, gptBackup, gptBg, claude]) expect(f.pendingScript, 'every scripted behaviour was used').toBe(0);
  });

  const fakeOf = (provider: string): AnyFake =>
    ({ gpt, 'gpt-backup': gptBackup, 'gpt-uncertified': gptBackup, 'gpt-bg': gptBg, claude })[provider] as AnyFake;

  /** Generation requests the provider's fake got for this attempt (polls are not the attempt's request). */
  const requestsOf = (provider: string, attemptId: string): RecordedRequest[] =>
    fakeOf(provider).requests.filter((r) => r.idempotencyKey === attemptId && ['chat.completions', 'responses.create', 'messages'].includes(r.endpoint!));

  interface JobView {
    id: string;
    status: string;
    result: unknown;
    completedBy: { id: string } | null;
    attempts: { id: string; number: number; provider: string; state: string; error: string | null }[];
  }

  /**
   * Creates a job. Its first attempt's behaviour is queued unkeyed *before* createJob (the runner may send
   * the attempt before createJob has even answered), on the primary's fake; tests run one at a time and
   * each checks its script was used up, so the entry cannot go to another attempt.
   */
  async function createJob(opts: {
    provider: string;
    fallbackProviders?: string[];
    attemptTimeoutMs?: number;
    first?: ScriptEntry;
    operation?: 'summarize' | 'classify';
  }): Promise<JobView> {
    if (opts.first) fakeOf(opts.provider).script(opts.first);
    const operation = opts.operation ?? 'summarize';
    const res = await gql(api.graphqlUrl, owner.token, CREATE_JOB, {
      input: {
        idempotencyKey: `adapters-${++keyCounter}`,
        operation,
        provider: opts.provider,
        fallbackProviders: opts.fallbackProviders ?? [],
        input: operation === 'classify' ? CLASSIFY_INPUT : SUMMARIZE_INPUT,
        ...(opts.attemptTimeoutMs ? { attemptTimeoutMs: opts.attemptTimeoutMs } : {}),
      },
    });
    return dataOf(res).createJob.job;
  }

  const readJob = async (id: string): Promise<JobView> => dataOf(await gql(api.graphqlUrl, owner.token, JOB, { id })).job;

  /** Polls the job over GraphQL until `done` holds. */
  const jobWhen = (id: string, done: (j: JobView) => boolean, what: string, timeoutMs = 10_000) =>
    eventually(async () => {
      const j = await readJob(id);
      return done(j) ? j : undefined;
    }, what, timeoutMs);

  async function attemptEvents(attemptId: string) {
    const { rows } = await db.pool.query(
      'SELECT type, attempt_state, message FROM job_events WHERE attempt_id = $1 ORDER BY seq',
      [attemptId],
    );
    return rows as { type: string; attempt_state: string; message: string | null }[];
  }

  async function attemptRow(id: string) {
    return (await db.pool.query('SELECT state, error, usage_tokens, prompt_tokens, provider_request_id FROM attempts WHERE id = $1', [id])).rows[0];
  }

  /** Rule: every attempt of the job sent exactly one request to its provider. */
  function expectOneRequestPerAttempt(job: JobView) {
    for (const a of job.attempts) {
      if (a.provider === 'backup') continue; // manual: nothing is sent
      expect(requestsOf(a.provider, a.id), `requests for attempt ${a.number} (${a.provider})`).toHaveLength(1);
    }
  }

  it('openai success: SUCCEEDED with the fake’s output; STARTING → RUNNING → SUCCEEDED; usage and prompt tokens recorded', async () => {
    const created = await createJob({ provider: 'gpt', first: { kind: 'ok', output: GOOD, usage: { inputTokens: 321, outputTokens: 45 } } });
    const attemptId = created.attempts[0]!.id;
    const job = await jobWhen(created.id, (j) => j.status === 'SUCCEEDED', 'the job to succeed');
    expect(job.result).toEqual(GOOD);
    expect(job.completedBy).toEqual({ id: attemptId, number: 1 });
    expect(job.attempts).toMatchObject([{ id: attemptId, provider: 'gpt', state: 'SUCCEEDED', error: null }]);
    expect((await attemptEvents(attemptId)).map((e) => `${e.type}:${e.attempt_state}`)).toEqual([
      'ATTEMPT_STARTED:STARTING',
      'ATTEMPT_RUNNING:RUNNING',
      'ATTEMPT_SUCCEEDED:SUCCEEDED',
      'JOB_SUCCEEDED:SUCCEEDED',
    ]);
    const row = await attemptRow(attemptId);
    expect(row.usage_tokens).toBe(366);
    expect(row.prompt_tokens).toBeGreaterThan(0);
    const [rec] = requestsOf('gpt', attemptId);
    expect(row.provider_request_id).toBe(rec!.providerId);
    expect(rec!.headers.authorization).toBe('Bearer e2e-openai');
    expectOneRequestPerAttempt(job);
  });

  it('anthropic success: SUCCEEDED with the tool input; usage = input + output tokens', async () => {
    const created = await createJob({ provider: 'claude', first: { kind: 'ok', output: GOOD, usage: { inputTokens: 200, outputTokens: 30 } } });
    const attemptId = created.attempts[0]!.id;
    const job = await jobWhen(created.id, (j) => j.status === 'SUCCEEDED', 'the job to succeed');
    expect(job.result).toEqual(GOOD);
    expect((await attemptEvents(attemptId)).map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_RUNNING', 'ATTEMPT_SUCCEEDED', 'JOB_SUCCEEDED']);
    const row = await attemptRow(attemptId);
    expect(row.usage_tokens).toBe(230);
    expect(row.prompt_tokens).toBeGreaterThan(0);
    expect(row.provider_request_id).toMatch(/^msg_/);
    expectOneRequestPerAttempt(job);
  });

  it('openai background (responses): RUNNING on accept, polled to SUCCEEDED, one create', async () => {
    const created = await createJob({ provider: 'gpt-bg', first: { kind: 'ok', output: GOOD } });
    const attemptId = created.attempts[0]!.id;
    const job = await jobWhen(created.id, (j) => j.status === 'SUCCEEDED', 'the background job to succeed');
    expect(job.result).toEqual(GOOD);
    expect((await attemptEvents(attemptId)).map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_RUNNING', 'ATTEMPT_SUCCEEDED', 'JOB_SUCCEEDED']);
    expect((await attemptRow(attemptId)).provider_request_id).toMatch(/^resp_/);
    expectOneRequestPerAttempt(job);
  });

  it('openai background: a poll that fails (HTTP 500 on retrieve) is not the attempt’s outcome; polling goes on', async () => {
    gptBg.script({ kind: 'status', status: 500, endpoint: 'responses.retrieve' });
    const created = await createJob({ provider: 'gpt-bg', first: { kind: 'ok', output: GOOD } });
    const attemptId = created.attempts[0]!.id;
    const job = await jobWhen(created.id, (j) => j.status === 'SUCCEEDED', 'the background job to succeed');
    expect(job.result).toEqual(GOOD);
    // RUNNING the whole time: the provider has the request and the runner still holds its claim.
    expect((await attemptEvents(attemptId)).map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_RUNNING', 'ATTEMPT_SUCCEEDED', 'JOB_SUCCEEDED']);
    const responseId = requestsOf('gpt-bg', attemptId)[0]!.providerId;
    const polls = gptBg.requests.filter((r) => r.endpoint === 'responses.retrieve' && r.path === `/v1/responses/${responseId}`);
    expect(polls.map((r) => r.status)).toEqual([500, 200, 200]);
    expectOneRequestPerAttempt(job);
  });

  it('4xx: the attempt is FAILED with the provider’s message; no fallback, so the job is FAILED', async () => {
    const created = await createJob({ provider: 'gpt', first: { kind: 'status', status: 400, message: 'Unsupported parameter: frobnicate.' } });
    const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
    expect(job.attempts).toMatchObject([{ state: 'FAILED', error: 'HTTP 400: Unsupported parameter: frobnicate.' }]);
    expect((await attemptEvents(job.attempts[0]!.id)).map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_FAILED']);
    expectOneRequestPerAttempt(job);
  });

  it('anthropic 529 overloaded: FAILED', async () => {
    const created = await createJob({ provider: 'claude', first: { kind: 'status', status: 529 } });
    const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
    expect(job.attempts[0]).toMatchObject({ state: 'FAILED', error: expect.stringMatching(/^HTTP 529: Overloaded/) });
    expectOneRequestPerAttempt(job);
  });

  it.each(['gpt', 'claude'])('timeout on %s (hang, attemptTimeoutMs 300): UNKNOWN, never FAILED; one request, aborted', async (provider) => {
    const created = await createJob({ provider, attemptTimeoutMs: 300, fallbackProviders: ['backup'], first: { kind: 'hang' } });
    const attemptId = created.attempts[0]!.id;
    const job = await jobWhen(created.id, (j) => j.attempts[0]!.state === 'UNKNOWN', 'the attempt to go UNKNOWN');
    expect(job.status).toBe('UNKNOWN');
    await fakeOf(provider).until(() => requestsOf(provider, attemptId)[0]?.closedByClient === true);
    const events = await attemptEvents(attemptId);
    expect(events.map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_UNKNOWN']);
    // An UNKNOWN attempt never starts the fallback by itself.
    const after = await readJob(created.id);
    expect(after.attempts).toHaveLength(1);
    expect(after.attempts[0]!.state).toBe('UNKNOWN');
    expectOneRequestPerAttempt(after);
  });

  it('an attempt whose deadline passes before it could be sent is never sent late (the database stalls 600 ms)', async () => {
    // Recording the prompt's token count is the runner's last step before sending; a stall there (here a
    // trigger in this test's own database) carries the attempt past its deadline with its claim ended.
    // First one job through, so that the tokenizer is built and a connection to the provider is open:
    // then nothing else slows the late send down enough for the deadline's abort to stop it by luck.
    const warm = await createJob({ provider: 'gpt' });
    await jobWhen(warm.id, (j) => j.status === 'SUCCEEDED', 'a first job to succeed');
    await db.pool.query(`
      CREATE FUNCTION adapters_test_stall() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.prompt_tokens IS DISTINCT FROM OLD.prompt_tokens THEN PERFORM pg_sleep(0.6); END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER adapters_test_stall BEFORE UPDATE ON attempts FOR EACH ROW EXECUTE FUNCTION adapters_test_stall();`);
    try {
      const created = await createJob({ provider: 'gpt', attemptTimeoutMs: 300, fallbackProviders: ['backup'] });
      const attemptId = created.attempts[0]!.id;
      const job = await jobWhen(created.id, (j) => j.attempts[0]!.state === 'UNKNOWN', 'the attempt to go UNKNOWN');
      await eventually(async () => (await attemptRow(attemptId)).prompt_tokens > 0 && api.app.runner.callsInFlight() === 0, 'the runner to be done with it');
      expect(requestsOf('gpt', attemptId)).toEqual([]);
      expect((await readJob(created.id)).attempts).toMatchObject([{ state: 'UNKNOWN' }]);
      const events = await attemptEvents(attemptId);
      expect(events.map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_UNKNOWN']);
      expect(events[1]!.message).toMatch(/^no outcome by the deadline/); // the deadline sweep's (rule 9)
      expect(job.status).toBe('UNKNOWN');
    } finally {
      await db.pool.query('DROP TRIGGER adapters_test_stall ON attempts; DROP FUNCTION adapters_test_stall()');
    }
  });

  it('connection reset after the request was sent: UNKNOWN before the deadline; the fallback is not started', async () => {
    const created = await createJob({ provider: 'gpt', fallbackProviders: ['backup'], first: { kind: 'resetAfterReceive' } });
    const attemptId = created.attempts[0]!.id;
    const job = await jobWhen(created.id, (j) => j.attempts[0]!.state === 'UNKNOWN', 'the attempt to go UNKNOWN', 5_000);
    expect(job.status).toBe('UNKNOWN');
    expect(job.attempts).toHaveLength(1);
    const events = await attemptEvents(attemptId);
    expect(events.map((e) => e.type)).toEqual(['ATTEMPT_STARTED', 'ATTEMPT_UNKNOWN']);
    expect(events[1]!.message).toMatch(/after the request was sent.*may still have done the work/);
    expect(requestsOf('gpt', attemptId)[0]!.reset).toBe(true);
    expectOneRequestPerAttempt(job);
  });

  it('malformed JSON: FAILED with the reason', async () => {
    const created = await createJob({ provider: 'gpt', first: { kind: 'malformedJson' } });
    const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
    expect(job.attempts[0]).toMatchObject({ state: 'FAILED', error: expect.stringMatching(/^malformed JSON from the provider/) });
    expectOneRequestPerAttempt(job);
  });

  it('anthropic malformed JSON (prose instead of the tool): FAILED naming malformed JSON', async () => {
    const created = await createJob({ provider: 'claude', first: { kind: 'malformedJson' } });
    const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
    expect(job.attempts[0]).toMatchObject({ state: 'FAILED', error: expect.stringMatching(/did not call the output tool.*malformed JSON/) });
    expectOneRequestPerAttempt(job);
  });

  it('hallucinated key: FAILED by the contract check, and the certified fallback starts and succeeds', async () => {
    const created = await createJob({ provider: 'gpt', fallbackProviders: ['gpt-backup'], first: { kind: 'hallucinatedKey', key: 'reasoning' } });
    const job = await jobWhen(created.id, (j) => j.status === 'SUCCEEDED', 'the fallback to succeed');
    expect(job.attempts).toMatchObject([
      { number: 1, provider: 'gpt', state: 'FAILED', error: expect.stringMatching(/breaks the summarize contract.*reasoning/) },
      { number: 2, provider: 'gpt-backup', state: 'SUCCEEDED' },
    ]);
    expect(job.completedBy).toMatchObject({ id: job.attempts[1]!.id });
    const { rows } = await db.pool.query('SELECT type, attempt_number FROM job_events WHERE job_id = $1 ORDER BY seq', [job.id]);
    expect(rows.map((r) => `${r.type}:${r.attempt_number ?? '-'}`)).toEqual([
      'JOB_CREATED:-',
      'ATTEMPT_STARTED:1',
      'ATTEMPT_RUNNING:1',
      'ATTEMPT_FAILED:1',
      'ATTEMPT_STARTED:2',
      'ATTEMPT_RUNNING:2',
      'ATTEMPT_SUCCEEDED:2',
      'JOB_SUCCEEDED:2',
    ]);
    expectOneRequestPerAttempt(job);
  });

  it('hallucinated key with a manual fallback: FAILED, and the manual attempt starts RUNNING at once', async () => {
    const created = await createJob({ provider: 'claude', fallbackProviders: ['backup'], first: { kind: 'hallucinatedKey' } });
    const job = await jobWhen(created.id, (j) => j.attempts.length === 2, 'the fallback attempt to start');
    expect(job.status).toBe('RUNNING');
    expect(job.attempts).toMatchObject([
      { provider: 'claude', state: 'FAILED', error: expect.stringMatching(/contract/) },
      { provider: 'backup', state: 'RUNNING' },
    ]);
    expectOneRequestPerAttempt(job);
  });

  it('hallucinated key with only an uncertified fallback: FAILED, FALLBACK_BLOCKED, nothing sent to it', async () => {
    const sentBefore = gptBackup.requests.length;
    const created = await createJob({ provider: 'gpt', fallbackProviders: ['gpt-uncertified'], first: { kind: 'hallucinatedKey' } });
    const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
    expect(job.attempts).toHaveLength(1);
    const { rows } = await db.pool.query(`SELECT provider FROM job_events WHERE job_id = $1 AND type = 'FALLBACK_BLOCKED'`, [job.id]);
    expect(rows).toEqual([{ provider: 'gpt-uncertified' }]);
    expect(gptBackup.requests.length).toBe(sentBefore);
    expectOneRequestPerAttempt(job);
  });

  it('anthropic wrong label (classify): FAILED by the business rule', async () => {
    const created = await createJob({ provider: 'claude', operation: 'classify', first: { kind: 'wrongLabel', label: 'fish' } });
    const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
    expect(job.attempts[0]).toMatchObject({ state: 'FAILED', error: expect.stringMatching(/business rule.*"fish" is not one of/) });
    expectOneRequestPerAttempt(job);
  });

  it('anthropic classify success: the label is one of the input’s', async () => {
    const created = await createJob({ provider: 'claude', operation: 'classify' });
    const job = await jobWhen(created.id, (j) => j.status === 'SUCCEEDED', 'the job to succeed');
    expect(job.result).toEqual({ label: 'dogs', confidence: 0.9 });
    expectOneRequestPerAttempt(job);
  });

  it('a provider whose key variable is unset: FAILED without a request', async () => {
    const saved = process.env[AN_ENV];
    delete process.env[AN_ENV];
    try {
      const before = claude.requests.length;
      const created = await createJob({ provider: 'claude' });
      const job = await jobWhen(created.id, (j) => j.status === 'FAILED', 'the job to fail');
      expect(job.attempts[0]).toMatchObject({ state: 'FAILED', error: `the API key variable ${AN_ENV} is not set` });
      expect(claude.requests.length).toBe(before);
    } finally {
      process.env[AN_ENV] = saved;
    }
  });

  it('every outcome above: never more than one generation request per attempt id', async () => {
    const { rows } = await db.pool.query<{ id: string; provider: string }>(`SELECT id, provider FROM attempts WHERE provider <> 'backup'`);
    for (const a of rows) {
      const n = requestsOf(a.provider, a.id).length;
      expect(n, `attempt ${a.id} on ${a.provider}`).toBeLessThanOrEqual(1);
    }
  });
});

