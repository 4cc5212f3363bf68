// OpenAI's Responses API in background mode: POST /v1/responses with `background: true` answers at once
// with a stored response in status "queued"; the client polls GET /v1/responses/{id} until it leaves
// queued/in_progress, and may POST /v1/responses/{id}/cancel. The fake never finishes a response by
// itself unless asked (option `settleAfterRetrieves`): the test decides when and how, so "the provider
// finished while we were down" or "it stays in progress past the deadline" need no timing luck.
import type { Content, Responder, RespondContext } from './respond.ts';
import { contentFor, messagesText, usageFor } from './respond.ts';
import type { ContentBehaviour } from './script.ts';
import type { Exchange } from './server.ts';
import { newId, sendJson } from './server.ts';
import { isRecord, jsonSchemaFormatProblem, numberProblem, sendOpenAIError, unixSeconds } from './openaiShared.ts';

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'incomplete';

const TERMINAL: ReadonlySet<ResponseStatus> = new Set(['completed', 'failed', 'cancelled', 'incomplete']);

/** The test's hand on background responses. Every method throws for an unknown id. */
export interface ResponsesControl {
  /** Ids of every response created so far, oldest first. */
  ids(): string[];
  /** The response object exactly as GET /v1/responses/{id} would answer it now. */
  get(id: string): Record<string, unknown>;
  /** queued → in_progress. */
  start(id: string): void;
  /**
   * Finishes the response with output rendered from `behaviour`, default the content behaviour scripted
   * for its create request (ok unless scripted): "completed", or "incomplete" (max_output_tokens) for a
   * truncated malformedJson. Works from any status, as a provider racing a cancel might.
   */
  complete(id: string, behaviour?: ContentBehaviour): void;
  /** Finishes it as "failed" with `error: { code, message }` (default server_error). */
  fail(id: string, error?: { code?: string; message?: string }): void;
}

interface Stored {
  id: string;
  createdAt: number;
  body: Record<string, unknown>;
  ctx: RespondContext;
  behaviour: ContentBehaviour;
  status: ResponseStatus;
  output: unknown[];
  usage: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
  incompleteDetails: { reason: string } | null;
  retrieves: number;
}

export function responsesContext(body: Record<string, unknown>): RespondContext {
  const format = isRecord(body.text) && isRecord(body.text.format) ? body.text.format : undefined;
  const input = body.input;
  const instructions = typeof body.instructions === 'string' ? body.instructions : '';
  return {
    endpoint: 'responses.create',
    operation: typeof format?.name === 'string' ? format.name : undefined,
    system: [instructions, messagesText(input, ['system', 'developer'])].filter(Boolean).join('\n'),
    user: typeof input === 'string' ? input : messagesText(input, ['user']),
    body,
  };
}

/** Why POST /v1/responses would be refused, if it would. */
export function responsesRequestProblem(body: unknown): string | undefined {
  if (!isRecord(body)) return 'We could not parse the JSON body of your request.';
  if (typeof body.model !== 'string' || body.model === '') return "Missing required parameter: 'model'.";
  if (!(typeof body.input === 'string' || (Array.isArray(body.input) && body.input.length > 0))) {
    return "Missing required parameter: 'input'.";
  }
  if (body.background === true && body.store === false) return 'Background mode requires store=true.';
  if (isRecord(body.text) && isRecord(body.text.format) && body.text.format.type === 'json_schema') {
    const problem = jsonSchemaFormatProblem(body.text.format, 'text.format');
    if (problem) return problem;
  }
  return numberProblem(body, 'temperature', 0, 2) ?? numberProblem(body, 'max_output_tokens', 16, 1e9, true);
}

function messageItem(content: Content, status: 'completed' | 'incomplete') {
  const part =
    content.kind === 'refusal'
      ? { type: 'refusal', refusal: content.message }
      : { type: 'output_text', text: content.text, annotations: [], logprobs: [] };
  return { id: newId('msg_'), type: 'message', status, role: 'assistant', content: [part] };
}

export function createResponsesStore(respond: Responder, settleAfterRetrieves: number | undefined) {
  const stored = new Map<string, Stored>();

  const find = (id: string) => {
    const s = stored.get(id);
    if (!s) throw new Error(`fake OpenAI: no response ${id}`);
    return s;
  };

  const finish = (s: Stored, behaviour: ContentBehaviour) => {
    const content = contentFor(behaviour, s.ctx, respond);
    const truncated = content.kind === 'broken' && content.truncated;
    const usage = usageFor(behaviour, s.ctx, content);
    s.status = truncated ? 'incomplete' : 'completed';
    s.incompleteDetails = truncated ? { reason: 'max_output_tokens' } : null;
    s.error = null;
    s.output = [messageItem(content, s.status)];
    s.usage = {
      input_tokens: usage.input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input + usage.output,
    };
  };

  const view = (s: Stored): Record<string, unknown> => ({
    id: s.id,
    object: 'response',
    created_at: s.createdAt,
    status: s.status,
    background: s.body.background === true,
    error: s.error,
    incomplete_details: s.incompleteDetails,
    instructions: s.body.instructions ?? null,
    max_output_tokens: s.body.max_output_tokens ?? null,
    model: s.body.model,
    output: s.output,
    parallel_tool_calls: true,
    previous_response_id: null,
    store: s.body.store !== false,
    temperature: s.body.temperature ?? 1,
    text: s.body.text ?? { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: s.usage,
    metadata: s.body.metadata ?? {},
  });

  const control: ResponsesControl = {
    ids: () => [...stored.keys()],
    get: (id) => view(find(id)),
    start(id) {
      const s = find(id);
      if (s.status === 'queued') s.status = 'in_progress';
    },
    complete(id, behaviour) {
      const s = find(id);
      finish(s, behaviour ?? s.behaviour);
    },
    fail(id, error = {}) {
      const s = find(id);
      s.status = 'failed';
      s.error = { code: error.code ?? 'server_error', message: error.message ?? 'The model failed to generate a response.' };
      s.output = [];
      s.usage = null;
    },
  };

  return {
    control,

    /** POST /v1/responses (already authorised and validated): queued when background, else completed. */
    create(ex: Exchange, body: Record<string, unknown>, behaviour: ContentBehaviour): void {
      const s: Stored = {
        id: newId('resp_'),
        createdAt: unixSeconds(),
        body,
        ctx: responsesContext(body),
        behaviour,
        status: 'queued',
        output: [],
        usage: null,
        error: null,
        incompleteDetails: null,
        retrieves: 0,
      };
      if (body.background !== true) finish(s, behaviour);
      stored.set(s.id, s);
      ex.record.providerId = s.id;
      sendJson(ex, 200, view(s), { 'x-request-id': `req_${ex.record.seq}` });
    },

    /** GET /v1/responses/{id}: the current state; settles on the n-th poll when so configured. */
    retrieve(ex: Exchange, id: string): void {
      const s = stored.get(id);
      ex.record.providerId = id;
      if (!s) return notFound(ex, id);
      s.retrieves += 1;
      if (settleAfterRetrieves !== undefined && !TERMINAL.has(s.status)) {
        if (s.retrieves >= settleAfterRetrieves) finish(s, s.behaviour);
        else s.status = 'in_progress';
      }
      sendJson(ex, 200, view(s), { 'x-request-id': `req_${ex.record.seq}` });
    },

    /** POST /v1/responses/{id}/cancel: queued/in_progress → cancelled; cancelling again is idempotent. */
    cancel(ex: Exchange, id: string): void {
      const s = stored.get(id);
      ex.record.providerId = id;
      if (!s) return notFound(ex, id);
      if (s.body.background !== true) {
        return sendOpenAIError(ex, 400, { message: 'Only responses created with background=true can be cancelled.' });
      }
      if (s.status !== 'cancelled' && TERMINAL.has(s.status)) {
        return sendOpenAIError(ex, 400, { message: `Cannot cancel a response with status '${s.status}'.` });
      }
      s.status = 'cancelled';
      s.output = [];
      sendJson(ex, 200, view(s), { 'x-request-id': `req_${ex.record.seq}` });
    },
  };
}

function notFound(ex: Exchange, id: string): void {
  sendOpenAIError(ex, 404, { message: `Response with id '${id}' not found.`, param: 'response_id' });
}
