// The usage ledger (CONTRACT.md section 8): one debit per succeeded job, under its effect key. One
// exported function per statement.
import type { PoolClient, Queryable } from './pool.ts';

export interface UsageEntry {
  effectKey: string;
  jobId: string;
  attemptId: string;
  units: number;
  at: Date;
}

export interface Usage {
  /** Every unit the owner was ever debited, not only the entries answered. */
  total: number;
  /** Newest first. */
  entries: UsageEntry[];
}

/**
 * Debits the owner once per effect key. ON CONFLICT DO NOTHING, not a check-then-insert: the primary
 * key decides, so a duplicate (a retried transaction, a second instance, a replayed report) changes
 * nothing. Answers whether this call wrote the debit. Runs inside the transaction that made the job
 * SUCCEEDED: the debit commits with the win, or not at all.
 */
export async function insertUsageDebit(
  client: PoolClient,
  p: { effectKey: string; ownerId: number; jobId: string; attemptId: string; units: number; at: Date },
): Promise<boolean> {
  const { rowCount } = await client.query(
    `INSERT INTO usage_ledger (effect_key, owner_id, job_id, attempt_id, units, at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (effect_key) DO NOTHING`,
    [p.effectKey, p.ownerId, p.jobId, p.attemptId, p.units, p.at],
  );
  return rowCount === 1;
}

/**
 * The owner's total and newest `limit` entries, in one statement so that both come from one snapshot
 * (two statements could see a debit land between them, and the total would not match the entries).
 */
export async function findUsage(q: Queryable, ownerId: number, limit: number): Promise<Usage> {
  const { rows } = await q.query(
    `SELECT (SELECT coalesce(sum(units), 0) FROM usage_ledger WHERE owner_id = $1)::bigint AS total,
            coalesce((
              SELECT jsonb_agg(jsonb_build_object('effectKey', e.effect_key, 'jobId', e.job_id, 'attemptId', e.attempt_id,
                                                  'units', e.units, 'at', e.at) ORDER BY e.at DESC, e.effect_key DESC)
              FROM (SELECT * FROM usage_ledger WHERE owner_id = $1 ORDER BY at DESC, effect_key DESC LIMIT $2) e
            ), '[]'::jsonb) AS entries`,
    [ownerId, limit],
  );
  const r = rows[0]!;
  return {
    total: Number(r.total),
    entries: (r.entries as Record<string, unknown>[]).map((e) => ({
      effectKey: e.effectKey as string,
      jobId: e.jobId as string,
      attemptId: e.attemptId as string,
      units: e.units as number,
      at: new Date(e.at as string),
    })),
  };
}
