import type { PoolClient } from './pool.ts';

export interface RaceLoss {
  jobId: string;
  loserAttemptId: string;
  winnerAttemptId: string | null;
  loserReadVersion: number;
  jobVersion: number;
  reason: string;
  payload: unknown;
  now: Date;
}

/** One row per result that lost the compare-and-swap, naming both sides; the payload is kept here only. */
export async function recordRaceLoss(client: PoolClient, r: RaceLoss): Promise<void> {
  await client.query(
    `INSERT INTO race_log (job_id, loser_attempt_id, winner_attempt_id, loser_read_version, job_version, reason, payload, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [r.jobId, r.loserAttemptId, r.winnerAttemptId, r.loserReadVersion, r.jobVersion, r.reason, JSON.stringify(r.payload), r.now],
  );
}
