import type { CallOutcome } from './types.ts';
import { exchange, providerErrorMessage, retryAfterMs, sleep, statusMeaning, type HttpExchange } from './http.ts';

/** A 429 is honoured at most this often per call, and only when the wait ends before the deadline. */
const MAX_RATE_LIMIT_WAITS = 3;
const DEFAULT_RETRY_AFTER_MS = 1_000;

/**
 * Sends one request, waiting out 429s (Retry-After) while the deadline allows, and classifies the
 * exchange. Answers the successful exchange, or the outcome that ends the call. A 429 is a refusal
 * before any work, so sending the same request again (same idempotency id) cannot do the work twice.
 */
export async function sendWithRateLimit(
  url: string,
  init: { method?: 'GET' | 'POST'; headers: Record<string, string>; body?: unknown; signal: AbortSignal },
  deadline: number,
): Promise<{ ok: Extract<HttpExchange, { kind: 'answered' }> } | { outcome: CallOutcome }> {
  for (let waits = 0; ; waits++) {
    const answer = await exchange(url, init);
    if (answer.kind === 'not-sent') return { outcome: { kind: 'failed', reason: answer.reason } };
    if (answer.kind === 'lost') return { outcome: { kind: 'unknown', reason: answer.reason } };
    const meaning = statusMeaning(answer.status);
    const message = `HTTP ${answer.status}: ${providerErrorMessage(answer.body)}`;
    if (meaning === 'ok') return { ok: answer };
    if (meaning === 'unknown') return { outcome: { kind: 'unknown', reason: message } };
    if (meaning === 'failed') return { outcome: { kind: 'failed', reason: message } };
    const wait = retryAfterMs(answer.headers) ?? DEFAULT_RETRY_AFTER_MS;
    if (waits >= MAX_RATE_LIMIT_WAITS || Date.now() + wait >= deadline) {
      return { outcome: { kind: 'failed', reason: `rate limited (${message}); Retry-After ${Math.round(wait / 1000)} s does not fit before the deadline` } };
    }
    if (!(await sleep(wait, init.signal))) return { outcome: { kind: 'failed', reason: `rate limited (${message}); deadline reached while waiting` } };
  }
}
