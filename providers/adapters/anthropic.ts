// Kind `anthropic`: the Messages API, with structured output through one forced tool call whose
// input_schema is the operation's output schema. The Messages API cannot be asked later what became
// of a request, so an UNKNOWN attempt on it waits for a report or an operator.
import type { Config } from '../../config.ts';
import { parseJsonOutput } from './parseOutput.ts';
import { sendWithRateLimit } from './sendWithRateLimit.ts';
import type { CallOutcome, CallRequest, ProviderAdapter } from './types.ts';

type AnthropicConfig = Extract<Config['providers'][string], { kind: 'anthropic' }>;

interface Message {
  id?: string;
  content?: { type: string; name?: string; input?: unknown; text?: string }[];
  stop_reason?: string;
  usage?: { input_tokens?: number; output_tokens?: number };
}

export function anthropicAdapter(config: AnthropicConfig, env: NodeJS.ProcessEnv = process.env): ProviderAdapter {
  const base = config.baseUrl.replace(/\/+$/, '');
  return {
    async call(req: CallRequest): Promise<CallOutcome> {
      const key = config.apiKeyEnv ? env[config.apiKeyEnv] : undefined;
      if (config.apiKeyEnv && !key) return { kind: 'failed', reason: `the API key variable ${config.apiKeyEnv} is not set` };
      const sent = await sendWithRateLimit(
        `${base}/v1/messages`,
        {
          headers: {
            ...(key ? { 'x-api-key': key } : {}),
            'anthropic-version': config.anthropicVersion,
            // The attempt's id as the request's identity; Anthropic echoes its own request-id.
            'idempotency-key': req.attemptId,
          },
          signal: req.signal,
          body: {
            model: config.model,
            max_tokens: req.maxOutputTokens,
            temperature: 0,
            system: req.prompt.system,
            messages: [{ role: 'user', content: req.prompt.user }],
            tools: [{ name: req.operation, description: `Return the ${req.operation} result.`, input_schema: req.outputSchema }],
            tool_choice: { type: 'tool', name: req.operation },
          },
        },
        req.deadline.getTime(),
      );
      if ('outcome' in sent) return sent.outcome;
      let message: Message;
      try {
        message = JSON.parse(sent.ok.body) as Message;
      } catch {
        return { kind: 'failed', reason: 'the provider answered 2xx with a body that is not JSON' };
      }
      await req.onAccepted(message.id);
      const providerRequestId = message.id;
      const usageTokens = (message.usage?.input_tokens ?? 0) + (message.usage?.output_tokens ?? 0) || undefined;
      if (message.stop_reason === 'refusal') return { kind: 'failed', reason: 'the model refused', providerRequestId };
      // Cut off at max_tokens, a tool_use block carries only the part of the input written so far: not an output.
      if (message.stop_reason === 'max_tokens') return { kind: 'failed', reason: 'the output was cut off at the token limit', providerRequestId };
      const tool = message.content?.find((c) => c.type === 'tool_use' && c.name === req.operation);
      if (!tool) {
        const text = message.content?.filter((c) => c.type === 'text').map((c) => c.text ?? '').join('') ?? '';
        // Say whether what it wrote instead was even JSON: "malformed JSON" is what an operator looks for.
        const parsed = text ? parseJsonOutput(text) : undefined;
        const wrote = parsed?.kind === 'failed' ? `; it wrote ${parsed.reason}` : text ? `; it wrote: ${JSON.stringify(text.slice(0, 120))}` : '';
        return { kind: 'failed', reason: `the model did not call the output tool${wrote}`, providerRequestId };
      }
      if (typeof tool.input !== 'object' || tool.input === null) {
        return { kind: 'failed', reason: 'the tool input is not a JSON object', providerRequestId };
      }
      return { kind: 'result', output: tool.input, usageTokens, providerRequestId };
    },
  };
}
