// Rule 9: an attempt with no outcome by its deadline becomes UNKNOWN within a second. Deadlines live in
// the database, so any instance (including one started after the deadline passed) does this; two
// instances sweeping together both try, and the compare-and-swap lets one of them do it.
import { findOverdueAttempts, markUnknownIfOverdue } from '../db/attempts.ts';
import { appendEvents } from '../db/events.ts';
import { lockJob } from '../db/jobs.ts';
import { inTransaction } from '../db/tx.ts';
import type { Core } from './core.ts';
import { runPeriodically, type Periodic } from './periodic.ts';

/** Well under the one second rule 9 allows, leaving room for a slow sweep. */
export const DEADLINE_SWEEP_INTERVAL_MS = 200;
const SWEEP_BATCH_SIZE = 200;

/** Turns every overdue attempt UNKNOWN; answers how many this call turned. */
export async function sweepOverdueAttempts(core: Core): Promise<number> {
  let turned = 0;
  for (;;) {
    const now = core.clock.now();
    const overdue = await findOverdueAttempts(core.pool, now, SWEEP_BATCH_SIZE);
    for (const { id, jobId } of overdue) {
      const done = await inTransaction(core.pool, async (client) => {
        await lockJob(client, jobId, undefined);
        const attempt = await markUnknownIfOverdue(client, id, now);
        if (!attempt) return false; // settled, cancelled or swept by another instance meanwhile
        await appendEvents(client, jobId, now, [
          {
            type: 'ATTEMPT_UNKNOWN',
            attemptId: id,
            message: `no outcome by the deadline ${attempt.deadlineAt.toISOString()}; the provider may still have done the work`,
          },
        ]);
        return true;
      });
      if (done) turned++;
    }
    if (overdue.length < SWEEP_BATCH_SIZE) return turned;
  }
}

export function startDeadlineSweeper(core: Core): Periodic {
  return runPeriodically('the deadline sweep', DEADLINE_SWEEP_INTERVAL_MS, () => sweepOverdueAttempts(core), core.log);
}
