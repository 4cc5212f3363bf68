// A local stand-in for Anthropic's Messages API (POST /v1/messages), for tests without internet. onejob
// gets structured output from Claude by forcing one tool (`tool_choice: {type: "tool", name}`) whose
// input_schema is the operation's output schema, so a good answer is one tool_use block named as asked.
// Faults are scripted per request (script.ts); errors use Anthropic's documented body
// `{type: "error", error: {type, message}, request_id}` and its status → type table (529 overloaded).
import type { Content, Responder, RespondContext } from './respond.ts';
import { contentFor, defaultRespond, messagesText, textOf, usageFor } from './respond.ts';
import type { ContentBehaviour, Endpoint, ScriptEntry, TransportBehaviour } from './script.ts';
import { Script } from './script.ts';
import type { Exchange, FakeServer, RecordedRequest } from './server.ts';
import { newId, perform, retryAfterHeader, sendJson, sendRaw, startFakeServer } from './server.ts';

export type { RecordedRequest } from './server.ts';
export type { Behaviour, ContentBehaviour, Endpoint, Match, ScriptEntry, TransportBehaviour } from './script.ts';
export type { Responder, RespondContext } from './respond.ts';
export { defaultRespond, parseClassifyPrompt } from './respond.ts';

export interface AnthropicFakeOptions {
  /** The key expected in `x-api-key`; anything else gets Anthropic's 401. Default "test-anthropic-key". */
  apiKey?: string;
  /** The model's output (the tool input) for a request answered successfully. Default: defaultRespond. */
  respond?: Responder;
}

export interface AnthropicFake {
  /** http://127.0.0.1:PORT — no /v1: Anthropic base URLs are the origin (the config's `baseUrl`). */
  baseUrl: string;
  requests: RecordedRequest[];
  script(...entries: ScriptEntry[]): void;
  readonly pendingScript: number;
  waitForRequest(predicate?: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>;
  until(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Anthropic's error type per HTTP status (docs: "HTTP errors"); other 4xx are invalid_request_error. */
const ERROR_TYPES: Record<number, [type: string, message: string]> = {
  400: ['invalid_request_error', 'Invalid request.'],
  401: ['authentication_error', 'invalid x-api-key'],
  403: ['permission_error', 'Your API key does not have permission to use the specified resource.'],
  404: ['not_found_error', 'The requested resource could not be found.'],
  413: ['request_too_large', 'Request exceeds the maximum allowed number of bytes.'],
  429: ['rate_limit_error', 'Number of requests has exceeded your rate limit.'],
  500: ['api_error', 'Internal server error'],
  529: ['overloaded_error', 'Overloaded'],
};

function sendAnthropicError(
  ex: Exchange,
  status: number,
  override: { type?: string; message?: string } = {},
  headers: Record<string, string> = {},
): void {
  const [type, message] = ERROR_TYPES[status] ?? (status >= 500 ? ERROR_TYPES[500]! : ERROR_TYPES[400]!);
  const requestId = `req_${ex.record.seq}`;
  const error = { type: override.type ?? type, message: override.message ?? message };
  sendJson(ex, status, { type: 'error', error, request_id: requestId }, { 'request-id': requestId, ...headers });
}

function sendScriptedError(ex: Exchange, b: Extract<TransportBehaviour, { kind: 'status' }>): void {
  if (b.rawBody !== undefined) return sendRaw(ex, b.status, b.rawBody, retryAfterHeader(b));
  sendAnthropicError(ex, b.status, b, retryAfterHeader(b));
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why POST /v1/messages would be refused, if it would (the checks Anthropic makes before any work). */
function requestProblem(body: unknown): string | undefined {
  if (!isRecord(body)) return 'There was an issue with the format of your request: the body is not JSON.';
  if (typeof body.model !== 'string' || body.model === '') return 'model: Field required';
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    return 'max_tokens: Field required (an integer of at least 1)';
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages: at least one message is required';
  const t = body.temperature;
  if (t !== undefined && (typeof t !== 'number' || t < 0 || t > 1)) return 'temperature: Input should be less than or equal to 1';
  const tools = body.tools ?? [];
  if (!Array.isArray(tools)) return 'tools: Input should be a valid list';
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool) || typeof tool.name !== 'string') return `tools.${i}.name: Field required`;
    if (!isRecord(tool.input_schema) || tool.input_schema.type !== 'object') return `tools.${i}.input_schema.type: Input should be 'object'`;
  }
  const choice = body.tool_choice;
  if (isRecord(choice) && choice.type === 'tool' && !tools.some((t) => isRecord(t) && t.name === choice.name)) {
    return `tool_choice: tool '${String(choice.name)}' was not found in tools`;
  }
  return undefined;
}

/** The forced tool's name: tool_choice's, else the only tool's. */
function toolName(body: Record<string, unknown>): string | undefined {
  const choice = body.tool_choice;
  if (isRecord(choice) && choice.type === 'tool' && typeof choice.name === 'string') return choice.name;
  const tools = Array.isArray(body.tools) ? body.tools : [];
  const only = tools.length === 1 && isRecord(tools[0]) ? tools[0].name : undefined;
  return typeof only === 'string' ? only : undefined;
}

function messagesContext(body: Record<string, unknown>): RespondContext {
  return {
    endpoint: 'messages',
    operation: toolName(body),
    system: textOf(body.system),
    user: messagesText(body.messages, ['user']),
    body,
  };
}

/** The content blocks and stop_reason a content behaviour becomes. */
function blocksFor(content: Content, name: string | undefined): { content: unknown[]; stop_reason: string } {
  const toolUse = (input: unknown) => ({ type: 'tool_use', id: newId('toolu_'), name, input });
  if (content.kind === 'refusal') return { content: [], stop_reason: 'refusal' };
  if (content.kind === 'broken') {
    // Out of tokens mid tool call: a partial input. Otherwise the model wrote broken JSON as prose.
    return content.truncated
      ? { content: [toolUse(content.partial)], stop_reason: 'max_tokens' }
      : { content: [{ type: 'text', text: content.text }], stop_reason: 'end_turn' };
  }
  if (name === undefined) return { content: [{ type: 'text', text: content.text }], stop_reason: 'end_turn' };
  return { content: [toolUse(content.value)], stop_reason: 'tool_use' };
}

function message(ex: Exchange, body: Record<string, unknown>, behaviour: ContentBehaviour, respond: Responder) {
  const ctx = messagesContext(body);
  const content = contentFor(behaviour, ctx, respond);
  const usage = usageFor(behaviour, ctx, content);
  const id = newId('msg_');
  ex.record.providerId = id;
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: body.model,
    ...blocksFor(content, toolName(body)),
    stop_sequence: null,
    usage: {
      input_tokens: usage.input,
      output_tokens: usage.output,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  };
}

const route = (method: string, path: string): Endpoint | undefined =>
  method === 'POST' && path === '/v1/messages' ? 'messages' : undefined;

export async function startAnthropicFake(options: AnthropicFakeOptions = {}): Promise<AnthropicFake> {
  const apiKey = options.apiKey ?? 'test-anthropic-key';
  const respond = options.respond ?? defaultRespond;
  const script = new Script();
  let server!: FakeServer;

  async function handle(ex: Exchange): Promise<void> {
    const headers = ex.req.headers;
    if (!ex.record.endpoint) {
      ex.record.answer = 'notFound';
      return sendAnthropicError(ex, 404, { message: `Not found: ${ex.record.method} ${ex.record.path}` });
    }
    if (headers['x-api-key'] !== apiKey) {
      ex.record.answer = 'unauthorized';
      return sendAnthropicError(ex, 401, { message: headers['x-api-key'] ? 'invalid x-api-key' : 'x-api-key header is required' });
    }
    const problem = headers['anthropic-version'] ? requestProblem(ex.record.body) : 'anthropic-version: header is required';
    if (problem) {
      ex.record.answer = 'badRequest';
      return sendAnthropicError(ex, 400, { message: problem });
    }
    const body = ex.record.body as Record<string, unknown>;
    await perform(server, ex, script.take('messages', ex.record.idempotencyKey), {
      error: (b) => sendScriptedError(ex, b),
      content: (b) => sendJson(ex, 200, message(ex, body, b, respond), { 'request-id': `req_${ex.record.seq}` }),
    });
  }

  server = await startFakeServer({ route, handle });
  return {
    baseUrl: server.origin,
    requests: server.requests,
    script: (...entries) => script.add(...entries),
    get pendingScript() {
      return script.pending;
    },
    waitForRequest: server.waitForRequest,
    until: server.until,
    stop: server.stop,
  };
}
