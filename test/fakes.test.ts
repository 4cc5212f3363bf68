// The fake providers themselves, over real HTTP with fetch: each scripted behaviour answers in the
// provider's documented format, requests are recorded, a reset really resets, a hang ends only when the
// client aborts, and the keys are checked. Adapter tests build on these promises.
import { afterEach, describe, expect, it } from 'vitest';
import { startAnthropicFake, type AnthropicFake } from './fakes/anthropicFake.ts';
import { startOpenAIFake, type OpenAIFake } from './fakes/openaiFake.ts';

const summarizeSchema = {
  type: 'object',
  properties: { summary: { type: 'string' }, keyPoints: { type: 'array', items: { type: 'string' } } },
  required: ['summary', 'keyPoints'],
  additionalProperties: false,
};
const classifySchema = {
  type: 'object',
  properties: { label: { type: 'string' }, confidence: { type: 'number' } },
  required: ['label', 'confidence'],
  additionalProperties: false,
};
const TEXT = 'The quick brown fox jumps over the lazy dog, and then it runs far away into the dark forest.';
const CLASSIFY_USER = `Labels: ["cats","dogs"]\n\nText:\nI walked my dogs today.`;

let fakes: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(fakes.map((f) => f.stop()));
  fakes = [];
});
const tracked = <F extends { stop(): Promise<void> }>(fake: F) => (fakes.push(fake), fake);
const openai = async (options?: Parameters<typeof startOpenAIFake>[0]) => tracked(await startOpenAIFake(options));
const anthropic = async () => tracked(await startAnthropicFake());

function chat(fake: OpenAIFake, opts: { op?: string; key?: string; idem?: string; schema?: object; signal?: AbortSignal } = {}) {
  const op = opts.op ?? 'summarize';
  return fetch(`${fake.baseUrl}/chat/completions`, {
    method: 'POST',
    signal: opts.signal,
    headers: {
      authorization: `Bearer ${opts.key ?? 'test-openai-key'}`,
      'content-type': 'application/json',
      ...(opts.idem ? { 'idempotency-key': opts.idem } : {}),
    },
    body: JSON.stringify({
      model: 'gpt-4.1-mini',
      temperature: 0,
      max_completion_tokens: 256,
      messages: [
        { role: 'system', content: 'Answer in JSON.' },
        { role: 'user', content: op === 'classify' ? CLASSIFY_USER : TEXT },
      ],
      response_format: {
        type: 'json_schema',
        json_schema: { name: op, strict: true, schema: opts.schema ?? (op === 'classify' ? classifySchema : summarizeSchema) },
      },
    }),
  }).then(async (res) => ({ res, body: (await res.json()) as any }));
}

function responses(fake: OpenAIFake, path = '', init: { method?: string; body?: object } = {}) {
  return fetch(`${fake.baseUrl}/responses${path}`, {
    method: init.method ?? (init.body || path.endsWith('/cancel') ? 'POST' : 'GET'),
    headers: { authorization: 'Bearer test-openai-key', 'content-type': 'application/json' },
    body: init.body ? JSON.stringify(init.body) : undefined,
  }).then(async (res) => ({ res, body: (await res.json()) as any }));
}
const createBackground = (fake: OpenAIFake) =>
  responses(fake, '', {
    body: {
      model: 'gpt-4.1-mini',
      background: true,
      instructions: 'Answer in JSON.',
      input: [{ role: 'user', content: TEXT }],
      text: { format: { type: 'json_schema', name: 'summarize', schema: summarizeSchema, strict: true } },
    },
  });

function messages(fake: AnthropicFake, opts: { op?: string; headers?: Record<string, string>; signal?: AbortSignal } = {}) {
  const op = opts.op ?? 'summarize';
  return fetch(`${fake.baseUrl}/v1/messages`, {
    method: 'POST',
    signal: opts.signal,
    headers: { 'x-api-key': 'test-anthropic-key', 'anthropic-version': '2023-06-01', 'content-type': 'application/json', ...opts.headers },
    body: JSON.stringify({
      model: 'claude-sonnet-4-5',
      max_tokens: 256,
      temperature: 0,
      system: 'Answer with the tool.',
      messages: [{ role: 'user', content: op === 'classify' ? CLASSIFY_USER : TEXT }],
      tools: [{ name: op, description: 'the output', input_schema: op === 'classify' ? classifySchema : summarizeSchema }],
      tool_choice: { type: 'tool', name: op },
    }),
  }).then(async (res) => ({ res, body: (await res.json()) as any }));
}

describe('OpenAI fake: chat completions', () => {
  it('answers a valid structured output by default and records the request', async () => {
    const fake = await openai();
    const { res, body } = await chat(fake, { idem: 'attempt-1' });
    expect(res.status).toBe(200);
    const choice = body.choices[0];
    expect(choice.finish_reason).toBe('stop');
    expect(choice.message.refusal).toBeNull();
    const output = JSON.parse(choice.message.content);
    expect(Object.keys(output).sort()).toEqual(['keyPoints', 'summary']);
    expect(output.summary.length).toBeLessThan(TEXT.length);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    expect(fake.requests).toHaveLength(1);
    const [rec] = fake.requests;
    expect(rec).toMatchObject({ method: 'POST', path: '/v1/chat/completions', endpoint: 'chat.completions', idempotencyKey: 'attempt-1' });
    expect(rec!.answer).toBe('ok');
    expect(rec!.status).toBe(200);
    expect(rec!.providerId).toBe(body.id);
    expect((rec!.body as any).response_format.json_schema.name).toBe('summarize');
  });

  it('classifies with one of the listed labels, or a wrong one when scripted', async () => {
    const fake = await openai();
    fake.script({ kind: 'ok' }, { kind: 'wrongLabel' });
    const good = JSON.parse((await chat(fake, { op: 'classify' })).body.choices[0].message.content);
    expect(good).toEqual({ label: 'dogs', confidence: 0.9 });
    const bad = JSON.parse((await chat(fake, { op: 'classify' })).body.choices[0].message.content);
    expect(['cats', 'dogs']).not.toContain(bad.label);
  });

  it('checks the Bearer key without using up the script', async () => {
    const fake = await openai({ apiKey: 'right' });
    fake.script({ kind: 'refusal' });
    const { res, body } = await chat(fake, { key: 'wrong' });
    expect(res.status).toBe(401);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
    expect(fake.requests[0]!.answer).toBe('unauthorized');
    expect(fake.pendingScript).toBe(1);
    expect((await chat(fake, { key: 'right' })).body.choices[0].message.refusal).toBeTruthy();
  });

  it('refuses a strict schema OpenAI would refuse', async () => {
    const fake = await openai();
    const { res, body } = await chat(fake, { schema: { ...summarizeSchema, additionalProperties: undefined } });
    expect(res.status).toBe(400);
    expect(body.error.message).toContain('additionalProperties');
  });

  it('plays scripted statuses in order, with Retry-After on 429', async () => {
    const fake = await openai();
    fake.script({ kind: 'status', status: 429, retryAfterSeconds: 3 }, { kind: 'status', status: 500, times: 2 });
    const first = await chat(fake);
    expect(first.res.status).toBe(429);
    expect(first.res.headers.get('retry-after')).toBe('3');
    expect(first.body.error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded', param: null });
    for (let i = 0; i < 2; i++) expect((await chat(fake)).body.error.type).toBe('server_error');
    expect((await chat(fake)).res.status).toBe(200);
    expect(fake.requests.map((r) => r.status)).toEqual([429, 500, 500, 200]);
  });

  it('targets a behaviour at one Idempotency-Key', async () => {
    const fake = await openai();
    fake.script({ kind: 'status', status: 503, idempotencyKey: 'b' });
    expect((await chat(fake, { idem: 'a' })).res.status).toBe(200);
    expect((await chat(fake, { idem: 'b' })).res.status).toBe(503);
    expect((await chat(fake, { idem: 'b' })).res.status).toBe(200);
    expect(fake.requests.filter((r) => r.idempotencyKey === 'b')).toHaveLength(2);
  });

  it('renders broken JSON, an extra key, a refusal and an output override', async () => {
    const fake = await openai();
    fake.script(
      { kind: 'malformedJson' },
      { kind: 'malformedJson', truncated: true },
      { kind: 'hallucinatedKey', key: 'extra' },
      { kind: 'refusal', message: 'no' },
      { kind: 'ok', output: { summary: 's', keyPoints: ['k'] }, usage: { inputTokens: 7, outputTokens: 5 } },
    );
    const broken = (await chat(fake)).body.choices[0];
    expect(() => JSON.parse(broken.message.content)).toThrow();
    expect(broken.finish_reason).toBe('stop');
    expect((await chat(fake)).body.choices[0].finish_reason).toBe('length');
    expect(JSON.parse((await chat(fake)).body.choices[0].message.content)).toHaveProperty('extra');
    const refused = (await chat(fake)).body.choices[0].message;
    expect(refused).toMatchObject({ content: null, refusal: 'no' });
    const overridden = (await chat(fake)).body;
    expect(JSON.parse(overridden.choices[0].message.content)).toEqual({ summary: 's', keyPoints: ['k'] });
    expect(overridden.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 });
  });

  it('delays an answer', async () => {
    const fake = await openai();
    fake.script({ kind: 'delay', ms: 150, then: { kind: 'status', status: 502 } });
    const started = Date.now();
    expect((await chat(fake)).res.status).toBe(502);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('hangs until the client aborts', async () => {
    const fake = await openai();
    fake.script({ kind: 'hang' });
    const abort = new AbortController();
    const pending = chat(fake, { signal: abort.signal });
    const rec = await fake.waitForRequest((r) => r.answer === 'hang');
    expect(rec.closedByClient).toBe(false);
    abort.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    await fake.until(() => rec.closedByClient);
    expect(rec.status).toBeUndefined();
  });

  it('resets the connection after reading the whole request', async () => {
    const fake = await openai();
    fake.script({ kind: 'resetAfterReceive' });
    const error = await chat(fake, { idem: 'x' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TypeError);
    expect((error as any).cause?.code).toMatch(/ECONNRESET|UND_ERR_SOCKET/);
    expect(fake.requests[0]).toMatchObject({ reset: true, status: undefined, idempotencyKey: 'x' });
    expect((fake.requests[0]!.body as any).model).toBe('gpt-4.1-mini');
    expect((await chat(fake)).res.status).toBe(200);
  });
});

describe('OpenAI fake: responses in background mode', () => {
  it('queues, then completes when the test says so', async () => {
    const fake = await openai();
    const created = await createBackground(fake);
    expect(created.body).toMatchObject({ object: 'response', status: 'queued', background: true, output: [], usage: null });
    const id = created.body.id as string;
    expect((await responses(fake, `/${id}`)).body.status).toBe('queued');
    fake.responses.start(id);
    expect((await responses(fake, `/${id}`)).body.status).toBe('in_progress');
    fake.responses.complete(id);
    const done = (await responses(fake, `/${id}`)).body;
    expect(done.status).toBe('completed');
    const part = done.output[0].content[0];
    expect(part.type).toBe('output_text');
    expect(JSON.parse(part.text).summary.length).toBeLessThan(TEXT.length);
    expect(done.usage.total_tokens).toBeGreaterThan(0);
    expect(fake.requests.map((r) => r.endpoint)).toEqual(['responses.create', 'responses.retrieve', 'responses.retrieve', 'responses.retrieve']);
  });

  it('fails, refuses, truncates, and 404s an unknown id', async () => {
    const fake = await openai();
    fake.script({ kind: 'refusal' }, { kind: 'malformedJson', truncated: true });
    const refused = (await createBackground(fake)).body.id;
    const truncated = (await createBackground(fake)).body.id;
    const failed = (await createBackground(fake)).body.id;
    fake.responses.complete(refused);
    fake.responses.complete(truncated);
    fake.responses.fail(failed, { message: 'boom' });
    expect((await responses(fake, `/${refused}`)).body.output[0].content[0].type).toBe('refusal');
    expect((await responses(fake, `/${truncated}`)).body).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect((await responses(fake, `/${failed}`)).body).toMatchObject({ status: 'failed', error: { code: 'server_error', message: 'boom' } });
    const missing = await responses(fake, '/resp_nope');
    expect(missing.res.status).toBe(404);
    expect(missing.body.error.type).toBe('invalid_request_error');
  });

  it('cancels (idempotently) and refuses to cancel a finished response', async () => {
    const fake = await openai();
    const id = (await createBackground(fake)).body.id;
    expect((await responses(fake, `/${id}/cancel`)).body.status).toBe('cancelled');
    expect((await responses(fake, `/${id}/cancel`)).body.status).toBe('cancelled');
    expect((await responses(fake, `/${id}`)).body.status).toBe('cancelled');
    const other = (await createBackground(fake)).body.id;
    fake.responses.complete(other);
    expect((await responses(fake, `/${other}/cancel`)).res.status).toBe(400);
  });

  it('settles by itself after n polls, and scripts faults on polls', async () => {
    const fake = await openai({ settleAfterRetrieves: 2 });
    fake.script({ kind: 'status', status: 500, endpoint: 'responses.retrieve' });
    const id = (await createBackground(fake)).body.id;
    expect((await responses(fake, `/${id}`)).res.status).toBe(500);
    expect((await responses(fake, `/${id}`)).body.status).toBe('in_progress');
    expect((await responses(fake, `/${id}`)).body.status).toBe('completed');
  });
});

describe('Anthropic fake: messages', () => {
  it('answers with the forced tool_use and records the request', async () => {
    const fake = await anthropic();
    const { res, body } = await messages(fake, { op: 'classify' });
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ type: 'message', role: 'assistant', stop_reason: 'tool_use' });
    expect(body.content).toHaveLength(1);
    expect(body.content[0]).toMatchObject({ type: 'tool_use', name: 'classify', input: { label: 'dogs', confidence: 0.9 } });
    expect(body.usage.input_tokens).toBeGreaterThan(0);
    expect(fake.requests[0]).toMatchObject({ endpoint: 'messages', answer: 'ok', providerId: body.id });
  });

  it('checks x-api-key and anthropic-version', async () => {
    const fake = await anthropic();
    const wrong = await messages(fake, { headers: { 'x-api-key': 'nope' } });
    expect(wrong.res.status).toBe(401);
    expect(wrong.body).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const noVersion = await messages(fake, { headers: { 'anthropic-version': '' } });
    expect(noVersion.res.status).toBe(400);
    expect(noVersion.body.error).toMatchObject({ type: 'invalid_request_error', message: 'anthropic-version: header is required' });
  });

  it('answers 529 overloaded and 429 with Retry-After', async () => {
    const fake = await anthropic();
    fake.script({ kind: 'status', status: 529 }, { kind: 'status', status: 429, retryAfterSeconds: 5 });
    const overloaded = await messages(fake);
    expect(overloaded.res.status).toBe(529);
    expect(overloaded.body).toMatchObject({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    const limited = await messages(fake);
    expect(limited.res.headers.get('retry-after')).toBe('5');
    expect(limited.body.error.type).toBe('rate_limit_error');
  });

  it('renders broken JSON, truncation, refusal, an extra key and a wrong label', async () => {
    const fake = await anthropic();
    fake.script(
      { kind: 'malformedJson' },
      { kind: 'malformedJson', truncated: true },
      { kind: 'refusal' },
      { kind: 'hallucinatedKey' },
      { kind: 'wrongLabel' },
    );
    const text = (await messages(fake)).body;
    expect(text.stop_reason).toBe('end_turn');
    expect(text.content.map((b: any) => b.type)).toEqual(['text']);
    expect(() => JSON.parse(text.content[0].text)).toThrow();
    expect((await messages(fake)).body.stop_reason).toBe('max_tokens');
    expect((await messages(fake)).body).toMatchObject({ stop_reason: 'refusal', content: [] });
    expect((await messages(fake)).body.content[0].input).toHaveProperty('reasoning');
    expect(['cats', 'dogs']).not.toContain((await messages(fake, { op: 'classify' })).body.content[0].input.label);
  });

  it('resets after receive and hangs until aborted, like the OpenAI fake', async () => {
    const fake = await anthropic();
    fake.script({ kind: 'resetAfterReceive' });
    await expect(messages(fake)).rejects.toBeInstanceOf(TypeError);
    fake.script({ kind: 'hang' });
    const abort = new AbortController();
    const pending = messages(fake, { signal: abort.signal });
    const rec = await fake.waitForRequest((r) => r.answer === 'hang');
    abort.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    await fake.until(() => rec.closedByClient);
  });
});
