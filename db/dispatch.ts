// Statements of the attempt runner: claiming attempts to send, and the fenced writes of a claim.
import type { PoolClient, Queryable } from './pool.ts';
import { toAttempt, type Attempt } from './rows.ts';

export interface ClaimedAttempt extends Attempt {
  operation: string;
  input: unknown;
  jobAttemptTimeoutMs: number | null;
}

/**
 * Claims up to `limit` attempts waiting to be sent, for this instance only. SKIP LOCKED lets several
 * instances claim at once without waiting on each other; the dispatched_at IS NULL condition (and a
 * trigger that makes the claim immutable) means an attempt is claimed — and so sent — at most once.
 * Attempts whose deadline has already passed are left to the deadline sweep.
 */
export async function claimAttemptsToDispatch(q: Queryable, p: { instanceId: string; now: Date; limit: number }): Promise<ClaimedAttempt[]> {
  const { rows } = await q.query(
    `UPDATE attempts a
     SET dispatched_by = $1, dispatched_at = $2, lease_token = nextval('attempt_lease_tokens')
     FROM (
       SELECT id FROM attempts
       WHERE state = 'STARTING' AND dispatched_at IS NULL AND deadline_at > $2
       ORDER BY started_at
       LIMIT $3
       FOR UPDATE SKIP LOCKED
     ) waiting, jobs j
     WHERE a.id = waiting.id AND j.id = a.job_id
     RETURNING a.*, j.operation, j.input, j.attempt_timeout_ms AS job_attempt_timeout_ms`,
    [p.instanceId, p.now, p.limit],
  );
  return rows.map((r) => ({ ...toAttempt(r), operation: r.operation, input: r.input, jobAttemptTimeoutMs: r.job_attempt_timeout_ms }));
}

/** Fenced: only the claim holder, only before the deadline, and only while the attempt is still STARTING. */
export async function markRunningIfClaimed(
  client: PoolClient,
  p: { id: string; leaseToken: number; providerRequestId: string | null; now: Date },
): Promise<Attempt | undefined> {
  const { rows } = await client.query(
    `UPDATE attempts SET state = 'RUNNING', provider_request_id = coalesce($3, provider_request_id)
     WHERE id = $1 AND lease_token = $2 AND state = 'STARTING' AND deadline_at > $4
     RETURNING *`,
    [p.id, p.leaseToken, p.providerRequestId, p.now],
  );
  return rows[0] ? toAttempt(rows[0]) : undefined;
}

/** Fenced: an ambiguous failure reported by the claim holder before the deadline. */
export async function markUnknownIfClaimed(
  client: PoolClient,
  p: { id: string; leaseToken: number; providerRequestId: string | null },
): Promise<Attempt | undefined> {
  const { rows } = await client.query(
    `UPDATE attempts SET state = 'UNKNOWN', provider_request_id = coalesce($3, provider_request_id)
     WHERE id = $1 AND lease_token = $2 AND state IN ('STARTING', 'RUNNING')
     RETURNING *`,
    [p.id, p.leaseToken, p.providerRequestId],
  );
  return rows[0] ? toAttempt(rows[0]) : undefined;
}

export async function recordPromptTokens(q: Queryable, id: string, promptTokens: number): Promise<void> {
  await q.query('UPDATE attempts SET prompt_tokens = $2 WHERE id = $1', [id, promptTokens]);
}

/** UNKNOWN attempts of these providers, least recently asked first, marked as asked now. */
export async function takeUnknownAttemptsToReconcile(
  q: Queryable,
  p: { providers: string[]; now: Date; askedBefore: Date; limit: number },
): Promise<Attempt[]> {
  const { rows } = await q.query(
    `UPDATE attempts a SET reconciled_at = $2
     FROM (
       SELECT id FROM attempts
       WHERE state = 'UNKNOWN' AND provider = ANY($1) AND (reconciled_at IS NULL OR reconciled_at < $3)
       ORDER BY reconciled_at NULLS FIRST
       LIMIT $4
       FOR UPDATE SKIP LOCKED
     ) due
     WHERE a.id = due.id
     RETURNING a.*`,
    [p.providers, p.now, p.askedBefore, p.limit],
  );
  return rows.map(toAttempt);
}
