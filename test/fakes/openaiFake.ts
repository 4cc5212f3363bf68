// A local stand-in for OpenAI, for tests without internet: Chat Completions with Structured Outputs, and
// the Responses API in background mode (openaiResponses.ts), in the documented wire formats, with the
// faults the adapter must classify scripted per request (script.ts). It checks what OpenAI checks first
// (the Bearer key, the body, a strict schema's shape), so an adapter cannot pass here and fail there.
import type { Responder, RespondContext } from './respond.ts';
import { contentFor, defaultRespond, messagesText, usageFor } from './respond.ts';
import type { ContentBehaviour, Endpoint, ScriptEntry } from './script.ts';
import { Script } from './script.ts';
import type { Exchange, FakeServer, RecordedRequest } from './server.ts';
import { newId, perform, sendJson, startFakeServer } from './server.ts';
import {
  checkBearer,
  isRecord,
  jsonSchemaFormatProblem,
  numberProblem,
  sendOpenAIError,
  sendScriptedOpenAIError,
  unixSeconds,
} from './openaiShared.ts';
import type { ResponsesControl } from './openaiResponses.ts';
import { createResponsesStore, responsesRequestProblem } from './openaiResponses.ts';

export type { RecordedRequest } from './server.ts';
export type { Behaviour, ContentBehaviour, Endpoint, Match, ScriptEntry, TransportBehaviour } from './script.ts';
export type { Responder, RespondContext } from './respond.ts';
export { defaultRespond, parseClassifyPrompt } from './respond.ts';
export type { ResponsesControl, ResponseStatus } from './openaiResponses.ts';

export interface OpenAIFakeOptions {
  /** The key expected in `Authorization: Bearer <key>`; anything else gets OpenAI's 401. Default "test-openai-key". */
  apiKey?: string;
  /** The model's output for a request that is answered successfully. Default: defaultRespond. */
  respond?: Responder;
  /**
   * Background responses finish by themselves on their n-th GET (earlier GETs see "in_progress"), as
   * their create's content behaviour says. Default: never by themselves; the test calls responses.*.
   */
  settleAfterRetrieves?: number;
}

export interface OpenAIFake {
  /** http://127.0.0.1:PORT/v1, what the adapter's config calls baseUrl. */
  baseUrl: string;
  /** Every request received, oldest first (live array). */
  requests: RecordedRequest[];
  /** Queues behaviours for the coming requests (see ScriptEntry). */
  script(...entries: ScriptEntry[]): void;
  /** Queued script entries not yet used up. */
  readonly pendingScript: number;
  /** The background responses: inspect, start, complete, fail. */
  responses: ResponsesControl;
  /** The first request matching `predicate`, waiting for it (default 5 s). */
  waitForRequest(predicate?: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>;
  /** Resolves once `predicate` holds, re-checked whenever a request arrives, is answered or is closed. */
  until(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

function route(method: string, path: string): Endpoint | undefined {
  if (method === 'POST' && path === '/v1/chat/completions') return 'chat.completions';
  if (method === 'POST' && path === '/v1/responses') return 'responses.create';
  if (method === 'GET' && /^\/v1\/responses\/[^/]+$/.test(path)) return 'responses.retrieve';
  if (method === 'POST' && /^\/v1\/responses\/[^/]+\/cancel$/.test(path)) return 'responses.cancel';
  return undefined;
}

function chatContext(body: Record<string, unknown>): RespondContext {
  const format = isRecord(body.response_format) ? body.response_format : undefined;
  const schema = isRecord(format?.json_schema) ? format.json_schema : undefined;
  return {
    endpoint: 'chat.completions',
    operation: typeof schema?.name === 'string' ? schema.name : undefined,
    system: messagesText(body.messages, ['system', 'developer']),
    user: messagesText(body.messages, ['user']),
    body,
  };
}

/** Why POST /v1/chat/completions would be refused, if it would. */
function chatRequestProblem(body: unknown): string | undefined {
  if (!isRecord(body)) return 'We could not parse the JSON body of your request.';
  if (typeof body.model !== 'string' || body.model === '') return "Missing required parameter: 'model'.";
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "Missing required parameter: 'messages'.";
  const format = body.response_format;
  if (isRecord(format) && format.type === 'json_schema') {
    if (!isRecord(format.json_schema)) return "Missing required parameter: 'response_format.json_schema'.";
    const problem = jsonSchemaFormatProblem(format.json_schema, 'response_format.json_schema');
    if (problem) return problem;
  }
  return (
    numberProblem(body, 'temperature', 0, 2) ??
    numberProblem(body, 'max_tokens', 1, 1e9, true) ??
    numberProblem(body, 'max_completion_tokens', 1, 1e9, true)
  );
}

/** A chat.completion object for one content behaviour. */
function chatCompletion(ex: Exchange, body: Record<string, unknown>, behaviour: ContentBehaviour, respond: Responder) {
  const ctx = chatContext(body);
  const content = contentFor(behaviour, ctx, respond);
  const usage = usageFor(behaviour, ctx, content);
  const id = newId('chatcmpl-');
  ex.record.providerId = id;
  return {
    id,
    object: 'chat.completion',
    created: unixSeconds(),
    model: body.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: content.kind === 'refusal' ? null : content.text,
          refusal: content.kind === 'refusal' ? content.message : null,
          annotations: [],
        },
        logprobs: null,
        finish_reason: content.kind === 'broken' && content.truncated ? 'length' : 'stop',
      },
    ],
    usage: {
      prompt_tokens: usage.input,
      completion_tokens: usage.output,
      total_tokens: usage.input + usage.output,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    },
    service_tier: 'default',
    system_fingerprint: 'fp_onejob_fake',
  };
}

export async function startOpenAIFake(options: OpenAIFakeOptions = {}): Promise<OpenAIFake> {
  const apiKey = options.apiKey ?? 'test-openai-key';
  const respond = options.respond ?? defaultRespond;
  const script = new Script();
  const store = createResponsesStore(respond, options.settleAfterRetrieves);
  let server!: FakeServer;

  async function handle(ex: Exchange): Promise<void> {
    const { endpoint, body } = ex.record;
    if (!endpoint) {
      ex.record.answer = 'notFound';
      return sendOpenAIError(ex, 404, { message: `Invalid URL (${ex.record.method} ${ex.record.path})` });
    }
    if (!checkBearer(ex, apiKey)) return;
    const problem =
      endpoint === 'chat.completions' ? chatRequestProblem(body) : endpoint === 'responses.create' ? responsesRequestProblem(body) : undefined;
    if (problem) {
      ex.record.answer = 'badRequest';
      return sendOpenAIError(ex, 400, { message: problem });
    }
    const id = ex.record.path.split('/')[3] ?? '';
    const behaviour = script.take(endpoint, ex.record.idempotencyKey);
    await perform(server, ex, behaviour, {
      error: (b) => sendScriptedOpenAIError(ex, b),
      content(b) {
        const json = body as Record<string, unknown>;
        if (endpoint === 'chat.completions') {
          sendJson(ex, 200, chatCompletion(ex, json, b, respond), { 'x-request-id': `req_${ex.record.seq}` });
        } else if (endpoint === 'responses.create') store.create(ex, json, b);
        else if (endpoint === 'responses.retrieve') store.retrieve(ex, id);
        else store.cancel(ex, id);
      },
    });
  }

  server = await startFakeServer({ route, handle });
  return {
    baseUrl: `${server.origin}/v1`,
    requests: server.requests,
    script: (...entries) => script.add(...entries),
    get pendingScript() {
      return script.pending;
    },
    responses: store.control,
    waitForRequest: server.waitForRequest,
    until: server.until,
    stop: server.stop,
  };
}
