// Statements on webhook_deliveries (migration 0003), one exported function each. A row is the natural
// key (provider, requestId, status) of an inbound result webhook and the outcome its first delivery got.
import type { PoolClient, Queryable } from './pool.ts';

export type DeliveryStatus = 'succeeded' | 'failed';
export type DeliveryOutcome = 'WON' | 'DISCARDED' | 'FAILED';

export interface DeliveryKey {
  provider: string;
  requestId: string;
  status: DeliveryStatus;
}

export interface WebhookDelivery extends DeliveryKey {
  attemptId: string;
  /** Null only inside the transaction that inserted the row (the database refuses to commit it so). */
  outcome: DeliveryOutcome | null;
  receivedAt: Date;
  expiresAt: Date;
  webhookId: string;
}

function toDelivery(r: Record<string, unknown>): WebhookDelivery {
  return {
    provider: r.provider as string,
    requestId: r.request_id as string,
    status: r.status as DeliveryStatus,
    attemptId: r.attempt_id as string,
    outcome: r.outcome as DeliveryOutcome | null,
    receivedAt: r.received_at as Date,
    expiresAt: r.expires_at as Date,
    webhookId: r.webhook_id as string,
  };
}

/**
 * Claims the natural key for this delivery. Answers the new row, or undefined when the key is already
 * held. The primary key decides, not a prior read: a concurrent claimer of the same key that has not
 * committed yet makes this statement wait for it, and once it commits this one inserts nothing (if it
 * rolls back, this one inserts). So of any number of concurrent deliveries exactly one gets a row.
 * Call it inside the transaction that settles the attempt, so the claim and the settlement commit together.
 */
export async function claimDelivery(
  client: PoolClient,
  d: DeliveryKey & { attemptId: string; receivedAt: Date; expiresAt: Date; webhookId: string },
): Promise<WebhookDelivery | undefined> {
  const { rows } = await client.query(
    `INSERT INTO webhook_deliveries (provider, request_id, status, attempt_id, received_at, expires_at, webhook_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (provider, request_id, status) DO NOTHING
     RETURNING *`,
    [d.provider, d.requestId, d.status, d.attemptId, d.receivedAt, d.expiresAt, d.webhookId],
  );
  return rows[0] ? toDelivery(rows[0]) : undefined;
}

/** Stores the outcome the settlement answered on a row this transaction claimed (once: the row is then final). */
export async function recordDeliveryOutcome(client: PoolClient, key: DeliveryKey, outcome: DeliveryOutcome): Promise<void> {
  await client.query(
    `UPDATE webhook_deliveries SET outcome = $4
     WHERE provider = $1 AND request_id = $2 AND status = $3 AND outcome IS NULL`,
    [key.provider, key.requestId, key.status, outcome],
  );
}

/**
 * The stored delivery for a key. Read in a statement after a claim that found the key held: under READ
 * COMMITTED each statement takes a fresh snapshot, so it sees the holder that the claim waited for.
 */
export async function findDelivery(q: Queryable, key: DeliveryKey): Promise<WebhookDelivery | undefined> {
  const { rows } = await q.query('SELECT * FROM webhook_deliveries WHERE provider = $1 AND request_id = $2 AND status = $3', [
    key.provider,
    key.requestId,
    key.status,
  ]);
  return rows[0] ? toDelivery(rows[0]) : undefined;
}
