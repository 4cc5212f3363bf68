// What the fake "model" says, independent of any API's envelope. The default responder plays a
// well-behaved model for onejob's operations, so a test only scripts the deviations it is about; the
// content behaviours (broken JSON, an extra key, a wrong label, a refusal) are derived from the good
// output, so they break exactly one rule each and the adapter's or runner's check can be pinned down.
import type { ContentBehaviour, Endpoint } from './script.ts';

/** One generation request, as the fake understood it. */
export interface RespondContext {
  endpoint: Endpoint;
  /**
   * The operation the adapter asked for: the json_schema name (OpenAI) or the forced tool's name
   * (Anthropic). Adapters set it to onejob's operation name ("summarize", "classify").
   */
  operation: string | undefined;
  /** The system prompt (system/developer messages, `instructions`, or Anthropic's `system`), joined. */
  system: string;
  /** The user messages' text, joined. */
  user: string;
  /** The parsed request body, for responders that need more. */
  body: Record<string, unknown>;
}

/** Produces the model's output (a JSON value) for a request. */
export type Responder = (ctx: RespondContext) => unknown;

/** What one answer carries, before a fake wraps it in its API's envelope. */
export type Content =
  | { kind: 'json'; value: unknown; text: string }
  | { kind: 'broken'; text: string; truncated: boolean; partial: Record<string, unknown> }
  | { kind: 'refusal'; message: string };

/** The label list and text of a classify prompt: `Labels: ["a","b"]\n\nText:\n...`. */
export function parseClassifyPrompt(user: string): { labels: string[]; text: string } | undefined {
  // The classify prompt: "Labels (n):\n[…json…]\n\n<text>\n…\n</text>" (older: "Labels: […]\n\nText:\n…").
  const match = /^Labels(?: \(\d+\))?:[ \n](\[.*\])$/m.exec(user);
  if (!match) return undefined;
  try {
    const labels: unknown = JSON.parse(match[1]!);
    if (!Array.isArray(labels) || !labels.every((l) => typeof l === 'string')) return undefined;
    const wrapped = /<text>\n([\s\S]*)\n<\/text>/.exec(user);
    const at = user.indexOf('Text:\n');
    return { labels, text: wrapped ? wrapped[1]! : at >= 0 ? user.slice(at + 'Text:\n'.length) : '' };
  } catch {
    return undefined;
  }
}

/** A summary strictly shorter (in code points, as the business rule counts) than the text. */
function summarizeText(text: string): { summary: string; keyPoints: string[] } {
  const chars = [...text.trim()];
  const summary = chars.slice(0, Math.min(2000, Math.max(1, Math.floor(chars.length / 2)))).join('') || 'x';
  return { summary, keyPoints: [[...summary].slice(0, 300).join('')] };
}

/**
 * A well-behaved model for onejob's operations: summarize gives a summary shorter than the text;
 * classify picks the first label that occurs in the text (else the first label), confidence 0.9. Any
 * other operation gets `{}`.
 */
export const defaultRespond: Responder = (ctx) => {
  if (ctx.operation === 'summarize') {
    // The summarize prompt wraps the text in <text> markers after a line about the length limit.
    const wrapped = /<text>\n([\s\S]*)\n<\/text>/.exec(ctx.user);
    return summarizeText(wrapped ? wrapped[1]! : ctx.user);
  }
  if (ctx.operation === 'classify') {
    const prompt = parseClassifyPrompt(ctx.user);
    if (!prompt || prompt.labels.length === 0) return { label: '', confidence: 0 };
    const text = prompt.text.toLowerCase();
    const label = prompt.labels.find((l) => text.includes(l.toLowerCase())) ?? prompt.labels[0]!;
    return { label, confidence: 0.9 };
  }
  return {};
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Renders a content behaviour for one request into what the answer carries. */
export function contentFor(behaviour: ContentBehaviour, ctx: RespondContext, respond: Responder): Content {
  if (behaviour.kind === 'refusal') {
    return { kind: 'refusal', message: behaviour.message ?? "I'm sorry, but I can't help with that request." };
  }
  const good = behaviour.kind === 'ok' && behaviour.output !== undefined ? behaviour.output : respond(ctx);
  switch (behaviour.kind) {
    case 'ok':
      return json(good);
    case 'hallucinatedKey':
      return json({ ...(isObject(good) ? good : { value: good }), [behaviour.key ?? 'reasoning']: 'a key the schema does not allow' });
    case 'wrongLabel': {
      const labels = parseClassifyPrompt(ctx.user)?.labels ?? [];
      let label = behaviour.label ?? 'not-a-label';
      for (let n = 2; behaviour.label === undefined && labels.includes(label); n++) label = `not-a-label-${n}`;
      return json({ ...(isObject(good) ? good : {}), label });
    }
    case 'malformedJson': {
      // A prefix of a serialized object never closes it, so the text can never parse.
      const full = JSON.stringify(isObject(good) ? good : { value: good });
      const text = full.slice(0, Math.max(1, Math.floor(full.length / 2)));
      const firstKey = isObject(good) ? Object.keys(good)[0] : undefined;
      const partial = firstKey !== undefined && isObject(good) ? { [firstKey]: good[firstKey] } : {};
      return { kind: 'broken', text, truncated: behaviour.truncated ?? false, partial };
    }
  }
}

function json(value: unknown): Content {
  return { kind: 'json', value, text: JSON.stringify(value) };
}

/** Text of the answer, for token estimates and envelopes that carry text. */
export function contentText(content: Content): string {
  return content.kind === 'refusal' ? content.message : content.text;
}

/** Token counts: the behaviour's override, else ≈ characters / 4 as real tokenizers roughly give. */
export function usageFor(behaviour: ContentBehaviour, ctx: RespondContext, content: Content): { input: number; output: number } {
  const estimate = (s: string) => Math.max(1, Math.ceil(s.length / 4));
  return {
    input: behaviour.usage?.inputTokens ?? estimate(ctx.system + ctx.user),
    output: behaviour.usage?.outputTokens ?? estimate(contentText(content)),
  };
}

/** Text of a message's `content`: a string, or an array of text parts (`text`/`input_text`). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (isObject(part) && typeof part.text === 'string' ? part.text : ''))
    .filter(Boolean)
    .join('\n');
}

/** Joins the text of the messages whose role is one of `roles`. */
export function messagesText(messages: unknown, roles: string[]): string {
  if (!Array.isArray(messages)) return '';
  return messages
    .filter((m) => isObject(m) && typeof m.role === 'string' && roles.includes(m.role))
    .map((m) => textOf((m as Record<string, unknown>).content))
    .join('\n');
}
