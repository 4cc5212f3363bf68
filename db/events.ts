// The job's event log: appended in the same transaction as the change it records (rule 16). The
// table's trigger sends the cross-instance wake-up; subscribers always read from here.
import type { PoolClient, Queryable } from './pool.ts';
import { toJobEvent, type JobEvent } from './rows.ts';
import type { AttemptState, JobEventType } from './states.ts';

export interface NewEvent {
  type: JobEventType;
  attemptId?: string | null;
  /** The attempt's state right after this event; defaults to its state in the table now. */
  attemptState?: AttemptState | null;
  /** Defaults to the attempt's provider. */
  provider?: string | null;
  message?: string | null;
}

/**
 * Appends events after the job's last seq, in order, in one statement. Each carries the job's status
 * as it stands once this transaction's changes are in: the status a reader can observe. The caller
 * holds the job's lock (db/jobs.ts lockJob), which is what makes max(seq) + n safe; the primary key
 * and the gap-free trigger refuse anything else.
 */
export async function appendEvents(client: PoolClient, jobId: string, now: Date, events: NewEvent[]): Promise<JobEvent[]> {
  if (events.length === 0) return [];
  const { rows } = await client.query(
    `WITH base AS (SELECT coalesce(max(seq), 0) AS seq FROM job_events WHERE job_id = $1),
     status AS (
       SELECT job_status(j.completed_by, j.cancelled_at,
                (SELECT a.state FROM attempts a WHERE a.job_id = j.id ORDER BY a.number DESC LIMIT 1)) AS s
       FROM jobs j WHERE j.id = $1
     )
     INSERT INTO job_events (job_id, seq, type, job_status, attempt_id, attempt_number, attempt_state, provider, message, at)
     SELECT $1, base.seq + e.ord, e.type, status.s, e.attempt_id, a.number, coalesce(e.attempt_state, a.state),
            coalesce(e.provider, a.provider), e.message, $2
     FROM base CROSS JOIN status
     CROSS JOIN unnest($3::job_event_type[], $4::uuid[], $5::attempt_state[], $6::text[], $7::text[])
       WITH ORDINALITY AS e (type, attempt_id, attempt_state, provider, message, ord)
     LEFT JOIN attempts a ON a.id = e.attempt_id
     ORDER BY e.ord
     RETURNING *`,
    [
      jobId,
      now,
      events.map((e) => e.type),
      events.map((e) => e.attemptId ?? null),
      events.map((e) => e.attemptState ?? null),
      events.map((e) => e.provider ?? null),
      events.map((e) => e.message ?? null),
    ],
  );
  return rows.map(toJobEvent);
}

export async function eventsAfter(q: Queryable, jobId: string, afterSeq: number, limit = 1000): Promise<JobEvent[]> {
  const { rows } = await q.query(
    'SELECT * FROM job_events WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [jobId, afterSeq, limit],
  );
  return rows.map(toJobEvent);
}
