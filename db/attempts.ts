// Statements on attempts. Every state change is a compare-and-swap on the states the state machine
// (db/states.ts) allows to move to the target, so a stale caller changes nothing.
import type { PoolClient, Queryable } from './pool.ts';
import { toAttempt, type Attempt } from './rows.ts';
import { LIVE_ATTEMPT_STATES, statesThatMayMoveTo, type AttemptState } from './states.ts';

export const ONE_LIVE_ATTEMPT_CONSTRAINT = 'attempts_one_live_per_job';

/**
 * Starts the job's next attempt, numbered after its last, reading the job's current version. Answers
 * undefined when the job is closed (won or cancelled). A live attempt already there makes the insert
 * fail on attempts_one_live_per_job (rule 7): the database, not this code, refuses the second one.
 */
export async function insertNextAttempt(
  client: PoolClient,
  p: { id: string; jobId: string; provider: string; state: 'STARTING' | 'RUNNING'; now: Date; timeoutMs: number },
): Promise<Attempt | undefined> {
  const { rows } = await client.query(
    `INSERT INTO attempts (id, job_id, number, provider, state, read_version, started_at, deadline_at)
     SELECT $1, j.id, 1 + coalesce((SELECT max(number) FROM attempts WHERE job_id = j.id), 0), $3, $4, j.version,
            $5, $5::timestamptz + make_interval(secs => $6::double precision / 1000)
     FROM jobs j
     WHERE j.id = $2 AND j.completed_by IS NULL AND j.cancelled_at IS NULL
     RETURNING *`,
    [p.id, p.jobId, p.provider, p.state, p.now, p.timeoutMs],
  );
  return rows[0] ? toAttempt(rows[0]) : undefined;
}

export async function findAttempt(q: Queryable, id: string): Promise<Attempt | undefined> {
  const { rows } = await q.query('SELECT * FROM attempts WHERE id = $1', [id]);
  return rows[0] ? toAttempt(rows[0]) : undefined;
}

export async function findAttemptsOfJob(q: Queryable, jobId: string): Promise<Attempt[]> {
  const { rows } = await q.query('SELECT * FROM attempts WHERE job_id = $1 ORDER BY number', [jobId]);
  return rows.map(toAttempt);
}

export async function findLiveAttempt(q: Queryable, jobId: string): Promise<Attempt | undefined> {
  const { rows } = await q.query(
    `SELECT * FROM attempts WHERE job_id = $1 AND state IN ('STARTING', 'RUNNING', 'UNKNOWN')`,
    [jobId],
  );
  return rows[0] ? toAttempt(rows[0]) : undefined;
}

/**
 * Moves an attempt to `to` if its current state allows it; answers the updated attempt, or undefined
 * when it was not in such a state. Leaving a live state stamps finished_at.
 */
export async function moveAttempt(
  client: PoolClient,
  p: {
    id: string;
    to: AttemptState;
    now: Date;
    error?: string | null;
    onlyFrom?: readonly AttemptState[];
    usageTokens?: number;
    providerRequestId?: string;
  },
): Promise<Attempt | undefined> {
  const allowed = statesThatMayMoveTo(p.to).filter((s) => !p.onlyFrom || p.onlyFrom.includes(s));
  const live = (LIVE_ATTEMPT_STATES as readonly AttemptState[]).includes(p.to);
  const { rows } = await client.query(
    `UPDATE attempts
     SET state = $2, error = coalesce($4, error), finished_at = CASE WHEN $5 THEN NULL ELSE $3::timestamptz END,
         usage_tokens = coalesce($7, usage_tokens), provider_request_id = coalesce($8, provider_request_id)
     WHERE id = $1 AND state = ANY($6::attempt_state[])
     RETURNING *`,
    [p.id, p.to, p.now, p.error ?? null, live, allowed, p.usageTokens ?? null, p.providerRequestId ?? null],
  );
  return rows[0] ? toAttempt(rows[0]) : undefined;
}

/** The live attempt of a job that is not yet UNKNOWN or later and whose deadline has passed. */
export async function findOverdueAttempts(q: Queryable, now: Date, limit: number): Promise<{ id: string; jobId: string }[]> {
  const { rows } = await q.query(
    `SELECT id, job_id FROM attempts
     WHERE state IN ('STARTING', 'RUNNING') AND deadline_at <= $1
     ORDER BY deadline_at LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => ({ id: r.id as string, jobId: r.job_id as string }));
}

/** Rule 9: past its deadline with no outcome, an attempt becomes UNKNOWN — never FAILED. */
export async function markUnknownIfOverdue(client: PoolClient, id: string, now: Date): Promise<Attempt | undefined> {
  const { rows } = await client.query(
    `UPDATE attempts SET state = 'UNKNOWN'
     WHERE id = $1 AND state IN ('STARTING', 'RUNNING') AND deadline_at <= $2
     RETURNING *`,
    [id, now],
  );
  return rows[0] ? toAttempt(rows[0]) : undefined;
}
