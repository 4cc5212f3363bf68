// Delivers queued callback notifications (db/outbox.ts) as Standard Webhooks messages. Runs on every
// instance (buildApp starts it, like the deadline sweeper); any number of them share the outbox: each
// claims due rows with FOR UPDATE SKIP LOCKED and a lease, so a notification is tried by one worker at
// a time. Delivery is at least once: a receiver deduplicates on webhook-id (= Idempotency-Key = the
// effect key), which is the same on every try of one notification.
//
// Nothing here touches a job or the usage ledger: a callback that keeps failing costs only its own
// retries, never blocks a job transaction, never repeats or undoes the debit.
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { claimDueCallbacks, markCallbackDelivered, recordCallbackFailure, releaseCallbackClaim, type OutboxRow } from '../db/outbox.ts';
import type { Core } from './core.ts';
import { runPeriodically, type Periodic } from './periodic.ts';

export interface CallbackDeliveryTuning {
  /** How often a worker looks for due notifications. */
  pollIntervalMs: number;
  /** One try's limit, from connecting to the response's headers. */
  requestTimeoutMs: number;
  /** The first retry's delay; each further one doubles it, up to backoffCapMs (with jitter). */
  backoffBaseMs: number;
  backoffCapMs: number;
  /** Notifications one worker claims at once (and POSTs in parallel). */
  batchSize: number;
}

export const DEFAULT_CALLBACK_DELIVERY: CallbackDeliveryTuning = {
  pollIntervalMs: 500,
  requestTimeoutMs: 10_000,
  backoffBaseMs: 1_000,
  backoffCapMs: 10 * 60_000,
  batchSize: 20,
};

/** Of a failing receiver's answer, this much is kept in last_error. */
const MAX_ERROR_BODY_CHARS = 300;

/**
 * The delay before try `tries + 1`, after `tries` failed ones: base × 2^(tries − 1), capped, with
 * "equal jitter" (half fixed, half random) so that many notifications failing together — a receiver
 * down — do not all come back in the same instant, while the delay still grows.
 */
export function backoffDelayMs(tries: number, tuning: Pick<CallbackDeliveryTuning, 'backoffBaseMs' | 'backoffCapMs'>, random = Math.random): number {
  const exp = Math.min(tuning.backoffCapMs, tuning.backoffBaseMs * 2 ** Math.max(0, Math.min(tries - 1, 40)));
  return Math.round(exp / 2 + random() * (exp / 2));
}

export interface DeliveryPass {
  claimed: number;
  delivered: number;
  failed: number;
}

export class CallbackDeliveryWorker {
  readonly tuning: CallbackDeliveryTuning;
  private ticks: Periodic | undefined;
  /** Aborts the POSTs in flight when the worker stops. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly core: Core,
    tuning: Partial<CallbackDeliveryTuning> = {},
  ) {
    this.tuning = { ...DEFAULT_CALLBACK_DELIVERY, ...tuning };
  }

  start(): void {
    this.ticks = runPeriodically('a callback delivery pass', this.tuning.pollIntervalMs, () => this.deliverDue(), this.core.log);
  }

  async stop(): Promise<void> {
    this.stopping.abort(new Error('the instance is stopping'));
    await this.ticks?.stop();
  }

  /** Claims and tries due notifications until none is due; answers what it did. */
  async deliverDue(): Promise<DeliveryPass> {
    const total: DeliveryPass = { claimed: 0, delivered: 0, failed: 0 };
    while (!this.stopping.signal.aborted) {
      const now = this.core.clock.now();
      const rows = await claimDueCallbacks(this.core.pool, {
        now,
        // Longer than one try can take, so that a live worker never loses its claim mid-POST.
        leaseUntil: new Date(now.getTime() + 3 * this.tuning.requestTimeoutMs),
        claimToken: randomUUID(),
        limit: this.tuning.batchSize,
      });
      total.claimed += rows.length;
      const outcomes = await Promise.all(rows.map((row) => this.deliverOne(row)));
      total.delivered += outcomes.filter((o) => o === 'delivered').length;
      total.failed += outcomes.filter((o) => o === 'failed').length;
      if (rows.length < this.tuning.batchSize) break;
    }
    return total;
  }

  private async deliverOne(row: OutboxRow): Promise<'delivered' | 'failed' | 'released'> {
    const { log } = this.core;
    const tried = await this.post(row);
    const now = this.core.clock.now();
    if (tried.ok) {
      const marked = await markCallbackDelivered(this.core.pool, { effectKey: row.effectKey, claimToken: row.claimToken, now, status: tried.status });
      if (!marked) log.warn({ effectKey: row.effectKey }, 'callback delivered after this worker lost its claim; it may be sent again');
      log.debug({ effectKey: row.effectKey, status: tried.status, attempt: row.attempts + 1 }, 'callback delivered');
      return 'delivered';
    }
    if (this.stopping.signal.aborted) {
      // Cut short by our own shutdown, not the receiver's fault: give it back untried (a receiver that
      // got it anyway sees the same webhook-id again).
      await releaseCallbackClaim(this.core.pool, { effectKey: row.effectKey, claimToken: row.claimToken }).catch(() => {});
      return 'released';
    }
    const tries = row.attempts + 1;
    // Retried until a 2xx, however long the receiver is down; the delay doubles up to its cap.
    const nextAttemptAt = new Date(now.getTime() + backoffDelayMs(tries, this.tuning));
    await recordCallbackFailure(this.core.pool, {
      effectKey: row.effectKey,
      claimToken: row.claimToken,
      now,
      status: tried.status,
      error: tried.error,
      nextAttemptAt,
    });
    log.warn({ effectKey: row.effectKey, attempt: tries, error: tried.error, nextAttemptAt }, 'callback failed; will retry');
    return 'failed';
  }

  /** One signed POST. Never throws: every failure becomes an error text for last_error. */
  private async post(row: OutboxRow): Promise<{ ok: true; status: number } | { ok: false; status: number | null; error: string }> {
    let headers: Record<string, string>;
    try {
      const sentAt = this.core.clock.now();
      headers = {
        'content-type': 'application/json',
        'user-agent': 'onejob-callbacks',
        'webhook-id': row.effectKey,
        'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
        // Signed afresh on every try (the timestamp is the try's), always over the same id and body.
        'webhook-signature': new Webhook(row.secret).sign(row.effectKey, sentAt, row.body),
        'idempotency-key': row.effectKey,
      };
    } catch (err) {
      return { ok: false, status: null, error: `cannot sign: ${(err as Error).message}` };
    }
    try {
      const res = await fetch(row.url, {
        method: 'POST',
        headers,
        body: row.body,
        // A redirect is not followed: it would re-send the message somewhere the owner did not name.
        // A 3xx is therefore a failure, like any non-2xx.
        redirect: 'manual',
        signal: AbortSignal.any([AbortSignal.timeout(this.tuning.requestTimeoutMs), this.stopping.signal]),
      });
      if (res.status >= 200 && res.status < 300) {
        await res.body?.cancel().catch(() => {});
        return { ok: true, status: res.status };
      }
      const text = await readSome(res, MAX_ERROR_BODY_CHARS);
      return { ok: false, status: res.status, error: `HTTP ${res.status}${text ? `: ${text}` : ''}` };
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      const reason = e.name === 'TimeoutError' ? `no answer within ${this.tuning.requestTimeoutMs} ms` : (e.cause?.code ?? e.cause?.message ?? e.message);
      return { ok: false, status: null, error: `request failed: ${reason}` };
    }
  }
}

/** Up to `max` characters of a response body, without reading a large one to its end. */
async function readSome(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    while (text.length < max) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // A body cut off is still a failed try; what was read is enough.
  } finally {
    await reader.cancel().catch(() => {});
  }
  return text.slice(0, max).replace(/\s+/g, ' ').trim();
}

export function startCallbackDelivery(core: Core, tuning: Partial<CallbackDeliveryTuning> = {}): CallbackDeliveryWorker {
  const worker = new CallbackDeliveryWorker(core, tuning);
  worker.start();
  return worker;
}
