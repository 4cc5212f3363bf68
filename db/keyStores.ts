// The deduplication stores and the statements that expire them. Each store keeps keys that guard
// against a duplicate of something that already happened; past its expires_at (3 × the sender's retry
// window) a key guards nothing any sender will still send, and is deleted. Only keys: the jobs,
// attempts, events, ledger entries and deliveries they guarded are history and stay.
import type { Queryable } from './pool.ts';

export const KEY_STORES = {
  /** createJob's (owner, idempotency key) → job. */
  idempotency_keys: { table: 'idempotency_keys', expired: 'expires_at <= $1' },
  /** Inbound webhooks' natural keys (provider, request id, status). */
  webhook_deliveries: { table: 'webhook_deliveries', expired: 'expires_at <= $1' },
  /** Outbound effect keys job:{id}:{outcome}; a notification still being retried is not expired. */
  callback_outbox: { table: 'callback_outbox', expired: 'expires_at <= $1 AND delivered_at IS NOT NULL' },
} as const;
export type KeyStore = keyof typeof KEY_STORES;

/**
 * Deletes up to `limit` expired keys of one store; answers how many. SKIP LOCKED leaves keys that a
 * request is using right now (an expired key being taken over by a new createJob) for a later batch.
 * Table and condition come from KEY_STORES above, never from input.
 */
export async function deleteExpiredKeys(q: Queryable, store: KeyStore, now: Date, limit: number): Promise<number> {
  const { table, expired } = KEY_STORES[store];
  const { rowCount } = await q.query(
    `DELETE FROM ${table} WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM ${table} WHERE ${expired} ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
    [now, limit],
  );
  return rowCount ?? 0;
}

export async function countKeys(q: Queryable, store: KeyStore): Promise<number> {
  const { rows } = await q.query(`SELECT count(*)::int AS n FROM ${KEY_STORES[store].table}`);
  return rows[0].n as number;
}
