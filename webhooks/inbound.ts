// POST /webhooks/{provider}: providers deliver attempt results as Standard Webhooks messages
// (CONTRACT.md section 8). This module is the HTTP side: route, authenticate, bound and validate the
// body, answer. What a delivery does to the attempt is acceptDelivery.ts.
//
// Order of refusals, each one changing nothing: 404 (no such webhook endpoint) → 405 → 503 (the
// secret is not there to verify with) → 401 (no signature headers) → 413 → 401 (signature, timestamp)
// → 400 (body) → 404/409 (attempt).
// Nothing the body says is looked at before its signature is verified.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { z } from 'zod';
import type { Core } from '../core/core.ts';
import { idempotencyKeyProblem } from '../core/createJob.ts';
import { jsonTextProblem, textProblem } from '../schema/scalars.ts';
import { acceptResultDelivery, DeliveryRefused, type DeliveryAnswer } from './acceptDelivery.ts';

export const WEBHOOKS_PATH_PREFIX = '/webhooks/';
/** A result is a small JSON document; anything bigger is refused (413) before it is buffered. */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;
/** Longest reported error kept, as for reportAttemptResult. */
const MAX_ERROR_CHARS = 10_000;

/** True for every path under /webhooks/: this module answers them all, Yoga none of them. */
export function isInboundWebhookPath(url: string | undefined): boolean {
  return url !== undefined && url.startsWith(WEBHOOKS_PATH_PREFIX);
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: { field?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }
}

const RequestId = z.string().superRefine((id, ctx) => {
  const problem = idempotencyKeyProblem(id);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const Result = z
  .custom<unknown>((v) => v !== undefined && v !== null, { message: 'is required when status is "succeeded"' })
  .superRefine((v, ctx) => {
    // jsonb cannot store U+0000, and a lone surrogate would be changed on the way: refuse, don't mangle.
    const problem = jsonTextProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: `cannot be stored: ${problem}` });
  });

const ErrorText = z
  .string({ message: 'is required when status is "failed" (a string)' })
  .trim()
  .min(1)
  .max(MAX_ERROR_CHARS)
  .superRefine((text, ctx) => {
    const problem = textProblem(text);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** Strict: a key not listed (e.g. `error` beside status "succeeded") is refused, not ignored. */
const DeliveryBody = z.discriminatedUnion('status', [
  z.strictObject({ attemptId: z.string().min(1), requestId: RequestId, status: z.literal('succeeded'), result: Result }),
  z.strictObject({ attemptId: z.string().min(1), requestId: RequestId, status: z.literal('failed'), error: ErrorText }),
]);

/** The first problem of a body, as a 400 naming its field. */
function badBody(error: z.ZodError): Refusal {
  const issue = error.issues[0]!;
  let field = issue.path.join('.');
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    field = issue.keys[0] ?? field;
    message = 'is not allowed here (send result only with status "succeeded", error only with status "failed")';
  } else if (issue.code === 'invalid_union' && field === 'status') {
    message = 'must be "succeeded" or "failed"';
  }
  const where = field || '(body)';
  return new Refusal(400, 'BAD_USER_INPUT', `${where}: ${message}`, { field: where });
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * The body as sent, byte for byte (the signature covers these bytes). Refuses (413) a declared or
 * actual size above the limit without buffering it; the connection is then closed, since the rest of
 * the body is never read.
 */
function readBody(req: IncomingMessage): Promise<Buffer> {
  const tooLarge = () =>
    new Refusal(413, 'BAD_USER_INPUT', `(body): larger than ${MAX_WEBHOOK_BODY_BYTES} bytes. Send the result in a smaller body.`, {
      field: '(body)',
      headers: { connection: 'close' },
    });
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_WEBHOOK_BODY_BYTES) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_WEBHOOK_BODY_BYTES) {
        cleanup();
        req.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

async function receive(core: Core, req: IncomingMessage): Promise<DeliveryAnswer> {
  const { pathname } = new URL(req.url ?? '/', 'http://localhost');
  let provider: string;
  try {
    provider = decodeURIComponent(pathname.slice(WEBHOOKS_PATH_PREFIX.length));
  } catch {
    provider = '';
  }
  const config = provider && !provider.includes('/') ? core.providers.get(provider) : undefined;
  if (!config?.webhookSecretEnv) {
    throw new Refusal(
      404,
      'NOT_FOUND',
      `No provider "${provider}" accepts webhooks here. POST to /webhooks/{provider} of a provider configured with webhookSecretEnv.`,
    );
  }
  if (req.method !== 'POST') {
    throw new Refusal(405, 'METHOD_NOT_ALLOWED', 'Deliver webhooks with POST.', { headers: { allow: 'POST' } });
  }

  // Read per request: a secret missing at start makes the service refuse these deliveries (503, which a
  // sender retries) rather than refuse to start or, worse, accept what it cannot verify. The variable's
  // name goes to the log, not to the sender.
  const secret = process.env[config.webhookSecretEnv];
  let webhook: Webhook | undefined;
  try {
    webhook = secret ? new Webhook(secret) : undefined;
  } catch (err) {
    const problem = `${config.webhookSecretEnv} is not a valid whsec_ secret (${(err as Error).message})`;
    core.log.error({ provider, env: config.webhookSecretEnv }, `webhooks of provider ${provider} refused: ${problem}`);
  }
  if (!webhook) {
    if (!secret) {
      const problem = `${config.webhookSecretEnv} is not set`;
      core.log.error({ provider, env: config.webhookSecretEnv }, `webhooks of provider ${provider} refused: ${problem}`);
    }
    throw new Refusal(
      503,
      'SERVICE_UNAVAILABLE',
      `Webhooks of provider "${provider}" cannot be verified: its signing secret is not configured on the service. Retry later.`,
      { headers: { 'retry-after': '60' } },
    );
  }

  const webhookId = header(req, 'webhook-id');
  const timestamp = header(req, 'webhook-timestamp');
  const signature = header(req, 'webhook-signature');
  if (!webhookId || !timestamp || !signature) {
    throw new Refusal(401, 'UNAUTHENTICATED', 'Sign the delivery: send webhook-id, webhook-timestamp and webhook-signature.');
  }
  const body = await readBody(req);
  try {
    // The library checks the timestamp against the machine's own clock (±5 minutes), not core.clock:
    // freshness is about real time on the wire. It signs and compares the Buffer as sent.
    const headers = { 'webhook-id': webhookId, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
    webhook.verify(body, headers, { jsonParse: false });
  } catch (err) {
    if (!(err instanceof WebhookVerificationError)) throw err;
    core.log.warn({ provider, webhookId, reason: err.message }, `webhook for provider ${provider} refused: ${err.message}`);
    throw new Refusal(
      401,
      'UNAUTHENTICATED',
      `Signature not accepted: ${err.message}. Sign id.timestamp.body with the provider's secret; timestamps must be within 5 minutes.`,
    );
  }

  // Verified. The library hashed the body decoded as UTF-8, where invalid bytes all become U+FFFD, so
  // two different byte strings could pass under one signature: only well-formed UTF-8 goes on.
  let raw: unknown;
  try {
    raw = JSON.parse(utf8.decode(body));
  } catch (err) {
    throw new Refusal(400, 'BAD_USER_INPUT', `(body): not a UTF-8 JSON document (${(err as Error).message})`, { field: '(body)' });
  }
  const parsed = DeliveryBody.safeParse(raw);
  if (!parsed.success) throw badBody(parsed.error);
  const d = parsed.data;

  try {
    return await acceptResultDelivery(core, {
      provider,
      webhookId,
      retryWindowSeconds: config.senderRetryWindowSeconds,
      attemptId: d.attemptId,
      requestId: d.requestId,
      ...(d.status === 'succeeded' ? { status: 'succeeded', result: d.result } : { status: 'failed', error: d.error }),
    });
  } catch (err) {
    if (err instanceof DeliveryRefused) throw new Refusal(err.status, err.code, err.message);
    throw err;
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

/** The request listener for /webhooks/*. It never throws: every failure is an answer. */
export function createInboundWebhookHandler(core: Core): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    try {
      const answer = await receive(core, req);
      send(res, 200, { outcome: answer.outcome, duplicate: answer.duplicate }, { 'dedup-expires-at': answer.expiresAt.toISOString() });
    } catch (err) {
      if (err instanceof Refusal) {
        const field = err.extra.field ? { field: err.extra.field } : {};
        send(res, err.status, { error: { code: err.code, message: err.message, ...field } }, err.extra.headers);
        return;
      }
      if (req.destroyed || res.destroyed) return; // the sender hung up; it will deliver again
      // Unexpected (the database down, a bug): masked like GraphQL's INTERNAL_SERVER_ERROR. The sender's
      // retry is safe either way: rolled back, it is new; committed, it answers as a duplicate.
      core.log.error({ err, url: req.url }, 'webhook delivery failed');
      send(res, 500, { error: { code: 'INTERNAL_SERVER_ERROR', message: 'Unexpected error. Deliver it again later.' } });
    }
  };
}
