// The callback outbox (CONTRACT.md section 8): notifications written with the job's outcome, then
// delivered by any instance's worker (core/callbackDelivery.ts). One exported function per statement.
import type { PoolClient, Queryable } from './pool.ts';

export interface OutboxRow {
  effectKey: string;
  ownerId: number;
  jobId: string;
  url: string;
  secret: string;
  /** The exact JSON text that is signed and sent on every try. */
  body: string;
  createdAt: Date;
  expiresAt: Date;
  /** Tries made before this claim. */
  attempts: number;
  claimToken: string;
}

const toOutboxRow = (r: Record<string, unknown>): OutboxRow => ({
  effectKey: r.effect_key as string,
  ownerId: r.owner_id as number,
  jobId: r.job_id as string,
  url: r.url as string,
  secret: r.secret as string,
  body: r.body as string,
  createdAt: r.created_at as Date,
  expiresAt: r.expires_at as Date,
  attempts: r.attempts as number,
  claimToken: r.claim_token as string,
});

/**
 * Queues the notification for the owner's callback as it stands now (URL and secret captured), in the
 * transaction of the outcome it announces. Nothing when the owner has no callback. ON CONFLICT DO
 * NOTHING on the effect key: an outcome reached again (a job failing again after retryJob) is not
 * notified again while the key is kept. Answers whether a row was queued.
 */
export async function enqueueCallback(
  client: PoolClient,
  p: { effectKey: string; ownerId: number; jobId: string; body: string; now: Date; expiresAt: Date },
): Promise<boolean> {
  const { rowCount } = await client.query(
    `INSERT INTO callback_outbox (effect_key, owner_id, job_id, url, secret, body, created_at, expires_at, next_attempt_at)
     SELECT $1, c.owner_id, $3, c.url, c.secret, $4, $5, $6, $5
     FROM callbacks c WHERE c.owner_id = $2
     ON CONFLICT (effect_key) DO NOTHING`,
    [p.effectKey, p.ownerId, p.jobId, p.body, p.now, p.expiresAt],
  );
  return rowCount === 1;
}

/**
 * Claims up to `limit` due notifications for one worker until `leaseUntil`. FOR UPDATE SKIP LOCKED lets
 * workers on several instances poll at once without waiting on each other or taking the same row; the
 * lease (claimed_until) keeps the row from the others after this statement commits, while the POST is
 * in flight. Hazard: a worker stalled past its lease loses the row to another, and the receiver may get
 * the message twice — with the same webhook-id, which is what receivers deduplicate on.
 */
export async function claimDueCallbacks(
  q: Queryable,
  p: { now: Date; leaseUntil: Date; claimToken: string; limit: number },
): Promise<OutboxRow[]> {
  const { rows } = await q.query(
    `UPDATE callback_outbox o SET claimed_until = $2, claim_token = $3
     FROM (
       SELECT effect_key FROM callback_outbox
       WHERE delivered_at IS NULL AND next_attempt_at <= $1
         AND (claimed_until IS NULL OR claimed_until <= $1)
       ORDER BY next_attempt_at
       LIMIT $4
       FOR UPDATE SKIP LOCKED
     ) due
     WHERE o.effect_key = due.effect_key
     RETURNING o.*`,
    [p.now, p.leaseUntil, p.claimToken, p.limit],
  );
  return rows.map(toOutboxRow);
}

/** A 2xx: delivered, for good. Only under the worker's own claim (answers false if it lost it). */
export async function markCallbackDelivered(
  q: Queryable,
  p: { effectKey: string; claimToken: string; now: Date; status: number },
): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE callback_outbox
     SET delivered_at = $3, attempts = attempts + 1, last_attempt_at = $3, last_status = $4,
         claimed_until = NULL, claim_token = NULL
     WHERE effect_key = $1 AND claim_token = $2 AND delivered_at IS NULL`,
    [p.effectKey, p.claimToken, p.now, p.status],
  );
  return rowCount === 1;
}

/** A failed try: counted, with its error, and the next one scheduled at `nextAttemptAt`. Only under the worker's claim. */
export async function recordCallbackFailure(
  q: Queryable,
  p: { effectKey: string; claimToken: string; now: Date; status: number | null; error: string; nextAttemptAt: Date },
): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE callback_outbox
     SET attempts = attempts + 1, last_attempt_at = $3, last_status = $4, last_error = $5, next_attempt_at = $6,
         claimed_until = NULL, claim_token = NULL
     WHERE effect_key = $1 AND claim_token = $2 AND delivered_at IS NULL`,
    [p.effectKey, p.claimToken, p.now, p.status, p.error, p.nextAttemptAt],
  );
  return rowCount === 1;
}

/** Gives a claimed row back untried (the worker is stopping): another instance may take it at once. */
export async function releaseCallbackClaim(q: Queryable, p: { effectKey: string; claimToken: string }): Promise<void> {
  await q.query(
    'UPDATE callback_outbox SET claimed_until = NULL, claim_token = NULL WHERE effect_key = $1 AND claim_token = $2',
    [p.effectKey, p.claimToken],
  );
}
