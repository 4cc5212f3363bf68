// Kind `openai`: any OpenAI-compatible host (OpenAI, vLLM, Ollama, …).
// api "chat": Chat Completions with a strict JSON-schema response format; one synchronous call.
// api "responses": the Responses API in background mode; the call returns at once with the response's
// id, and the outcome is retrieved by that id — which is also what lets the reconciler settle an
// UNKNOWN attempt and cancelAttempt stop the work at the provider.
import type { Config } from '../../config.ts';
import { exchange, providerErrorMessage, statusMeaning } from './http.ts';
import { parseJsonOutput } from './parseOutput.ts';
import { sendWithRateLimit } from './sendWithRateLimit.ts';
import type { CallOutcome, CallRequest, ProviderAdapter } from './types.ts';

type OpenAIConfig = Extract<Config['providers'][string], { kind: 'openai' }>;

interface ChatCompletion {
  id?: string;
  choices?: { message?: { content?: string | null; refusal?: string | null }; finish_reason?: string }[];
  usage?: { total_tokens?: number };
}

interface ResponseObject {
  id: string;
  status: 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'incomplete';
  output_text?: string;
  output?: { type: string; content?: { type: string; text?: string; refusal?: string }[] }[];
  error?: { message?: string } | null;
  incomplete_details?: { reason?: string } | null;
  usage?: { total_tokens?: number };
}

export function openaiAdapter(config: OpenAIConfig, env: NodeJS.ProcessEnv = process.env): ProviderAdapter {
  const base = config.baseUrl.replace(/\/+$/, '');
  /** The auth header; undefined when the configured key variable is not set. */
  const auth = (): Record<string, string> | undefined => {
    const key = config.apiKeyEnv ? env[config.apiKeyEnv] : undefined;
    if (config.apiKeyEnv && !key) return undefined;
    return key ? { authorization: `Bearer ${key}` } : {};
  };
  /**
   * Headers of the request that makes the model work. The attempt's id is that request's identity at
   * the provider too. Only that request carries it: a retrieve or a cancel sent under the same
   * Idempotency-Key would be a different request reusing the key, which an idempotency layer answers
   * with the create's stored response (the cancel silently not done) or a 422.
   */
  const headers = (attemptId: string): Record<string, string> | undefined => {
    const h = auth();
    return h && { ...h, 'idempotency-key': attemptId, 'x-client-request-id': attemptId };
  };
  const missingKey = (): CallOutcome => ({ kind: 'failed', reason: `the API key variable ${config.apiKeyEnv} is not set` });

  async function callChat(req: CallRequest): Promise<CallOutcome> {
    const h = headers(req.attemptId);
    if (!h) return missingKey();
    const sent = await sendWithRateLimit(
      `${base}/chat/completions`,
      {
        headers: h,
        signal: req.signal,
        body: {
          model: config.model,
          temperature: 0,
          max_completion_tokens: req.maxOutputTokens,
          messages: [
            { role: 'system', content: req.prompt.system },
            { role: 'user', content: req.prompt.user },
          ],
          response_format: { type: 'json_schema', json_schema: { name: req.operation, schema: req.outputSchema, strict: true } },
        },
      },
      req.deadline.getTime(),
    );
    if ('outcome' in sent) return sent.outcome;
    let body: ChatCompletion;
    try {
      body = JSON.parse(sent.ok.body) as ChatCompletion;
    } catch {
      return { kind: 'failed', reason: 'the provider answered 2xx with a body that is not JSON' };
    }
    await req.onAccepted(body.id);
    const choice = body.choices?.[0];
    const extra = { usageTokens: body.usage?.total_tokens, providerRequestId: body.id };
    if (choice?.message?.refusal) return { kind: 'failed', reason: `the model refused: ${choice.message.refusal}`, providerRequestId: body.id };
    if (choice?.finish_reason === 'length') return { kind: 'failed', reason: 'the output was cut off at the token limit', providerRequestId: body.id };
    if (typeof choice?.message?.content !== 'string') return { kind: 'failed', reason: 'the answer has no message content', providerRequestId: body.id };
    return parseJsonOutput(choice.message.content, extra);
  }

  async function createBackgroundResponse(req: CallRequest): Promise<CallOutcome> {
    const h = headers(req.attemptId);
    if (!h) return missingKey();
    const sent = await sendWithRateLimit(
      `${base}/responses`,
      {
        headers: h,
        signal: req.signal,
        body: {
          model: config.model,
          background: true,
          temperature: 0,
          max_output_tokens: req.maxOutputTokens,
          instructions: req.prompt.system,
          input: req.prompt.user,
          text: { format: { type: 'json_schema', name: req.operation, schema: req.outputSchema, strict: true } },
        },
      },
      req.deadline.getTime(),
    );
    if ('outcome' in sent) return sent.outcome;
    let created: ResponseObject;
    try {
      created = JSON.parse(sent.ok.body) as ResponseObject;
    } catch {
      return { kind: 'unknown', reason: 'the provider accepted the request but its answer is not JSON: no id to follow' };
    }
    await req.onAccepted(created.id);
    return outcomeOfResponse(created);
  }

  function outcomeOfResponse(r: ResponseObject): CallOutcome {
    const extra = { usageTokens: r.usage?.total_tokens, providerRequestId: r.id };
    switch (r.status) {
      case 'queued':
      case 'in_progress':
        return { kind: 'pending', providerRequestId: r.id };
      case 'failed':
        return { kind: 'failed', reason: `the provider failed the request: ${r.error?.message ?? 'no reason given'}`, providerRequestId: r.id };
      case 'cancelled':
        return { kind: 'failed', reason: 'the request was cancelled at the provider', providerRequestId: r.id };
      case 'incomplete':
        return { kind: 'failed', reason: `incomplete output: ${r.incomplete_details?.reason ?? 'unknown reason'}`, providerRequestId: r.id };
      case 'completed': {
        const parts = (r.output ?? []).flatMap((o) => o.content ?? []);
        const refusal = parts.find((p) => p.type === 'refusal');
        if (refusal) return { kind: 'failed', reason: `the model refused: ${refusal.refusal ?? ''}`, providerRequestId: r.id };
        const text = r.output_text ?? parts.filter((p) => p.type === 'output_text').map((p) => p.text ?? '').join('');
        return parseJsonOutput(text, extra);
      }
      default:
        return { kind: 'unknown', reason: `unexpected response status ${String(r.status)}`, providerRequestId: r.id };
    }
  }

  return {
    call: (req) => (config.api === 'responses' ? createBackgroundResponse(req) : callChat(req)),
    ...(config.api === 'responses'
      ? {
          async retrieve({ providerRequestId }, signal) {
            if (!providerRequestId) return { kind: 'unknown', reason: 'the provider never gave an id for this request' };
            const h = auth();
            if (!h) return missingKey();
            const answer = await exchange(`${base}/responses/${encodeURIComponent(providerRequestId)}`, { method: 'GET', headers: h, signal });
            if (answer.kind !== 'answered') return { kind: 'unknown', reason: answer.reason, providerRequestId };
            if (statusMeaning(answer.status) !== 'ok') {
              return { kind: 'unknown', reason: `retrieve answered HTTP ${answer.status}: ${providerErrorMessage(answer.body)}`, providerRequestId };
            }
            let found: ResponseObject;
            try {
              found = JSON.parse(answer.body) as ResponseObject;
            } catch {
              return { kind: 'unknown', reason: 'retrieve answered 2xx with a body that is not JSON', providerRequestId };
            }
            return outcomeOfResponse(found);
          },
          async cancel({ providerRequestId }, signal) {
            const h = auth();
            if (!providerRequestId || !h) return;
            await exchange(`${base}/responses/${encodeURIComponent(providerRequestId)}/cancel`, { headers: h, body: {}, signal });
          },
        }
      : {}),
  };
}
