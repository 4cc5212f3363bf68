// One HTTP exchange with a provider, classified by what it tells us about whether the provider got
// the request. The hazard this guards: treating "we do not know" as "it failed", which would start a
// second attempt while the first may still be doing (and billing) the work.

/** Errors that happen before a byte of the request reaches the provider: it surely did nothing. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'ERR_INVALID_URL']);

export type HttpExchange =
  | { kind: 'answered'; status: number; headers: Headers; body: string }
  /** The request never left: safe to call a definitive failure. */
  | { kind: 'not-sent'; reason: string }
  /** Sent, and then nothing certain: a reset, a timeout, an abort. */
  | { kind: 'lost'; reason: string };

function errorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; e && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export async function exchange(
  url: string,
  init: { method?: 'GET' | 'POST'; headers: Record<string, string>; body?: unknown; signal: AbortSignal },
): Promise<HttpExchange> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: init.method ?? 'POST',
      headers: { accept: 'application/json', ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}), ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal: init.signal,
    });
  } catch (err) {
    if (init.signal.aborted) return { kind: 'lost', reason: `no answer before the deadline (${String(init.signal.reason ?? 'aborted')})` };
    const code = errorCode(err);
    if (code && NOT_SENT_CODES.has(code)) return { kind: 'not-sent', reason: `could not reach the provider (${code})` };
    return { kind: 'lost', reason: `the connection failed after the request was sent (${code ?? (err as Error).message})` };
  }
  try {
    return { kind: 'answered', status: response.status, headers: response.headers, body: await response.text() };
  } catch (err) {
    return { kind: 'lost', reason: `the answer was cut off (${errorCode(err) ?? (err as Error).message})` };
  }
}

/** Retry-After in milliseconds (seconds or an HTTP date), or undefined. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const value = headers.get('retry-after');
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The provider's own error message from a JSON error body, or the start of the body. */
export function providerErrorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } | string; message?: string };
    if (typeof parsed.error === 'object' && parsed.error?.message) return parsed.error.message;
    if (typeof parsed.error === 'string') return parsed.error;
    if (parsed.message) return parsed.message;
  } catch {
    // not JSON
  }
  return body.slice(0, 200);
}

/**
 * What an HTTP status means for the attempt. 502 and 504 come from something between us and the
 * model after it may have started: unknown. 500 too: the model may have run. 503 and 529 (overloaded)
 * and 4xx are refusals before any work: definitive.
 */
export function statusMeaning(status: number): 'ok' | 'rate-limited' | 'failed' | 'unknown' {
  if (status >= 200 && status < 300) return 'ok';
  if (status === 429) return 'rate-limited';
  if (status === 500 || status === 502 || status === 504) return 'unknown';
  return 'failed';
}

export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
