// Statements on jobs and idempotency keys, one exported function each.
import type { PoolClient, Queryable } from './pool.ts';
import { toJob, toJobView, type Job, type JobView } from './rows.ts';
import type { AttemptState, JobStatus } from './states.ts';

export interface NewJob {
  ownerId: number;
  idempotencyKey: string;
  jobId: string;
  attemptId: string;
  operation: string;
  provider: string;
  fallbackProviders: string[];
  input: unknown;
  attemptTimeoutMs: number | null;
  fingerprint: string;
  now: Date;
  keyExpiresAt: Date;
  /** The first attempt's state: RUNNING for a provider that dispatches at once, else STARTING. */
  attemptState: Extract<AttemptState, 'STARTING' | 'RUNNING'>;
  /** The first attempt's deadline, from now. */
  attemptDeadlineMs: number;
}

export type ClaimResult =
  | { kind: 'created'; job: JobView }
  | { kind: 'held'; job: JobView }
  /** The key is held by a job whose key has expired: take it over with takeOverExpiredKey. */
  | { kind: 'expired' }
  /** Held by a request that committed while this statement ran: read it with findJobHoldingKey. */
  | { kind: 'held-unseen' };

/**
 * Inserts the job, attempt 1 and its events for a key row that `claimed` (a CTE yielding job_id)
 * has just written: the shared tail of both claim statements.
 */
const CREATE_JOB_FOR_CLAIMED_KEY = `
new_job AS (
  INSERT INTO jobs (id, owner_id, idempotency_key, operation, provider, fallback_providers, input,
                    attempt_timeout_ms, fingerprint, created_at, key_expires_at)
  SELECT job_id, $1, $2, $6, $7, $8, $9, $10, $11, $4, $5 FROM claimed
  RETURNING *
), new_attempt AS (
  INSERT INTO attempts (id, job_id, number, provider, state, read_version, started_at, deadline_at)
  SELECT $12, id, 1, provider, $13, version, created_at, created_at + make_interval(secs => $14::double precision / 1000)
  FROM new_job
  RETURNING *
), new_events AS (
  INSERT INTO job_events (job_id, seq, type, job_status, attempt_id, attempt_number, attempt_state, provider, at)
  SELECT j.id, e.seq, e.type, job_status(j.completed_by, j.cancelled_at, a.state),
         CASE WHEN e.seq > 1 THEN a.id END, CASE WHEN e.seq > 1 THEN a.number END, e.state, j.provider, j.created_at
  FROM new_job j
  CROSS JOIN new_attempt a
  CROSS JOIN (VALUES (1, 'JOB_CREATED'::job_event_type, NULL::attempt_state),
                     (2, 'ATTEMPT_STARTED', 'STARTING'),
                     (3, 'ATTEMPT_RUNNING', 'RUNNING')) AS e (seq, type, state)
  WHERE e.seq <= CASE WHEN a.state = 'RUNNING' THEN 3 ELSE 2 END
  ORDER BY e.seq
  RETURNING seq
), created AS (
  SELECT j.*, job_status(j.completed_by, j.cancelled_at, a.state) AS status,
         jsonb_build_array(to_jsonb(a)) AS attempts, (SELECT count(*) FROM new_events) AS events
  FROM new_job j CROSS JOIN new_attempt a
)`;

/**
 * createJob in one statement, for the new path and the replay path alike. The key row is the guard
 * (rule 1). When this statement's snapshot already shows the key, the answer is that job (or "expired")
 * and nothing is written or locked, so any number of replays run side by side. Otherwise it inserts the
 * key, and with it the job, attempt 1 and its events. ON CONFLICT DO NOTHING waits for a concurrent
 * claimer to commit, but this snapshot predates that commit: then nothing is returned and the caller
 * reads the holder in a second statement (only in that race).
 */
const CLAIM_KEY_AND_CREATE_JOB = `
WITH held AS (
  SELECT job_id, expires_at FROM idempotency_keys WHERE owner_id = $1 AND idempotency_key = $2
), claimed AS (
  INSERT INTO idempotency_keys (owner_id, idempotency_key, job_id, created_at, expires_at)
  SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT FROM held)
  ON CONFLICT (owner_id, idempotency_key) DO NOTHING
  RETURNING job_id
), ${CREATE_JOB_FOR_CLAIMED_KEY}
SELECT c.*, 'created' AS claim FROM created c
UNION ALL
SELECT v.*, 0 AS events, CASE WHEN h.expires_at > $4 THEN 'held' ELSE 'expired' END
FROM held h JOIN job_view v ON v.id = h.job_id`;

/**
 * Rule 5: an expired key is taken over by a new job. The conditional DO UPDATE lets exactly one of
 * several concurrent requests take it; the others find it held (by the new job) in a second statement.
 */
const TAKE_OVER_EXPIRED_KEY = `
WITH claimed AS (
  INSERT INTO idempotency_keys AS k (owner_id, idempotency_key, job_id, created_at, expires_at)
  VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (owner_id, idempotency_key) DO UPDATE
    SET job_id = EXCLUDED.job_id, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
    WHERE k.expires_at <= EXCLUDED.created_at
  RETURNING job_id
), ${CREATE_JOB_FOR_CLAIMED_KEY}
SELECT c.*, 'created' AS claim FROM created c`;

const claimParams = (n: NewJob) => [
  n.ownerId, n.idempotencyKey, n.jobId, n.now, n.keyExpiresAt,
  n.operation, n.provider, n.fallbackProviders, JSON.stringify(n.input), n.attemptTimeoutMs, n.fingerprint,
  n.attemptId, n.attemptState, n.attemptDeadlineMs,
];

function toClaimResult(row: Record<string, unknown> | undefined): ClaimResult {
  if (!row) return { kind: 'held-unseen' };
  if (row.claim === 'expired') return { kind: 'expired' };
  return { kind: row.claim === 'created' ? 'created' : 'held', job: toJobView(row) };
}

export async function claimKeyAndCreateJob(q: Queryable, n: NewJob): Promise<ClaimResult> {
  const { rows } = await q.query(CLAIM_KEY_AND_CREATE_JOB, claimParams(n));
  return toClaimResult(rows[0]);
}

export async function takeOverExpiredKey(q: Queryable, n: NewJob): Promise<ClaimResult> {
  const { rows } = await q.query(TAKE_OVER_EXPIRED_KEY, claimParams(n));
  return toClaimResult(rows[0]);
}

export async function findJobHoldingKey(q: Queryable, ownerId: number, key: string, now: Date): Promise<JobView | undefined> {
  const { rows } = await q.query(
    `SELECT v.* FROM idempotency_keys k JOIN job_view v ON v.id = k.job_id
     WHERE k.owner_id = $1 AND k.idempotency_key = $2 AND k.expires_at > $3`,
    [ownerId, key, now],
  );
  return rows[0] ? toJobView(rows[0]) : undefined;
}

/** A job by id; ownerId limits it to that owner's jobs (undefined: any owner, for operators). */
export async function findJob(q: Queryable, id: string, ownerId: number | undefined): Promise<JobView | undefined> {
  const { rows } = await q.query(
    'SELECT * FROM job_view WHERE id = $1 AND ($2::bigint IS NULL OR owner_id = $2)',
    [id, ownerId ?? null],
  );
  return rows[0] ? toJobView(rows[0]) : undefined;
}

/** The job an owner's key names: the one holding it now, else the newest that ever used it. */
export async function findJobByKey(q: Queryable, ownerId: number, key: string): Promise<JobView | undefined> {
  const { rows } = await q.query(
    `SELECT * FROM job_view WHERE owner_id = $1 AND idempotency_key = $2
     ORDER BY (id = (SELECT job_id FROM idempotency_keys WHERE owner_id = $1 AND idempotency_key = $2)) DESC NULLS LAST,
              created_at DESC
     LIMIT 1`,
    [ownerId, key],
  );
  return rows[0] ? toJobView(rows[0]) : undefined;
}

export interface JobPageQuery {
  ownerId: number | undefined;
  status: JobStatus | undefined;
  first: number;
  after: { createdAt: Date; id: string } | undefined;
}

/** Newest first, keyset-paginated on (created_at, id); fetches one extra row to tell hasNextPage. */
export async function listJobs(q: Queryable, p: JobPageQuery): Promise<JobView[]> {
  const { rows } = await q.query(
    `SELECT * FROM job_view
     WHERE ($1::bigint IS NULL OR owner_id = $1)
       AND ($2::job_status IS NULL OR status = $2)
       AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
     ORDER BY created_at DESC, id DESC
     LIMIT $5`,
    [p.ownerId ?? null, p.status ?? null, p.after?.createdAt ?? null, p.after?.id ?? null, p.first + 1],
  );
  return rows.map(toJobView);
}

/**
 * Takes the job's row lock for the rest of the transaction. Every transaction that changes a job or
 * its attempts takes it first, so a job's changes (and its event seq) are applied one at a time, and
 * locks are always taken job first, then attempts: no deadlock between them.
 */
export async function lockJob(client: PoolClient, id: string, ownerId: number | undefined): Promise<Job | undefined> {
  const { rows } = await client.query(
    'SELECT * FROM jobs WHERE id = $1 AND ($2::bigint IS NULL OR owner_id = $2) FOR NO KEY UPDATE',
    [id, ownerId ?? null],
  );
  return rows[0] ? toJob(rows[0]) : undefined;
}

/** lockJob for the job an attempt belongs to, in one statement (the attempt's job never changes). */
export async function lockJobOfAttempt(client: PoolClient, attemptId: string, ownerId: number | undefined): Promise<Job | undefined> {
  const { rows } = await client.query(
    `SELECT j.* FROM jobs j
     WHERE j.id = (SELECT job_id FROM attempts WHERE id = $1) AND ($2::bigint IS NULL OR j.owner_id = $2)
     FOR NO KEY UPDATE`,
    [attemptId, ownerId ?? null],
  );
  return rows[0] ? toJob(rows[0]) : undefined;
}

/**
 * Rule 11: the compare-and-swap that lets exactly one result win. Zero rows means this attempt lost:
 * another result won, or the job was cancelled, since it read the job's version.
 */
export async function completeJobIfStillOpen(
  client: PoolClient,
  p: { jobId: string; readVersion: number; attemptId: string; result: unknown },
): Promise<number | undefined> {
  const { rows } = await client.query(
    `UPDATE jobs SET result = $4, completed_by = $3, version = version + 1
     WHERE id = $1 AND version = $2 AND completed_by IS NULL
     RETURNING version`,
    [p.jobId, p.readVersion, p.attemptId, JSON.stringify(p.result)],
  );
  return rows[0]?.version as number | undefined;
}

/** Rule 14: cancelling bumps the version so that every later result loses the swap. */
export async function cancelJobIfOpen(client: PoolClient, jobId: string, now: Date): Promise<number | undefined> {
  const { rows } = await client.query(
    `UPDATE jobs SET cancelled_at = $2, version = version + 1
     WHERE id = $1 AND completed_by IS NULL AND cancelled_at IS NULL
     RETURNING version`,
    [jobId, now],
  );
  return rows[0]?.version as number | undefined;
}
