// What happens when an attempt's outcome arrives — by reportAttemptResult, and later by a provider's
// answer, a webhook or reconciliation: all of them come through settleAttempt (rules 10–13).
import { findAttempt, moveAttempt } from '../db/attempts.ts';
import { appendEvents } from '../db/events.ts';
import { completeJobIfStillOpen, lockJobOfAttempt } from '../db/jobs.ts';
import type { PoolClient } from '../db/pool.ts';
import { recordRaceLoss } from '../db/raceLog.ts';
import type { Attempt, Job } from '../db/rows.ts';
import { isLive, type AttemptState } from '../db/states.ts';
import { inTransaction } from '../db/tx.ts';
import { OPERATIONS, checkOutput } from '../providers/operations/index.ts';
import { fallOverAfterFailure } from './attemptLifecycle.ts';
import type { Core } from './core.ts';
import { notFound } from './errors.ts';
import { recordJobSucceeded } from './outcomeEffects.ts';

export type ReportOutcome = 'WON' | 'DISCARDED' | 'FAILED';

export type AttemptOutcome = { result: unknown } | { error: string };

export interface Settlement {
  attempt: Attempt;
  jobId: string;
  outcome: ReportOutcome;
  /** False when the attempt was already settled and nothing changed (a duplicate delivery, rule 13). */
  changed: boolean;
  /** Set when this result lost the compare-and-swap. */
  loss?: {
    jobId: string;
    loserAttemptId: string;
    loserAttemptNumber: number;
    winnerAttemptId: string | null;
    readVersion: number;
    jobVersion: number;
    reason: string;
  };
}

const OUTCOME_OF_FINAL_STATE: Partial<Record<AttemptState, ReportOutcome>> = {
  SUCCEEDED: 'WON',
  FAILED: 'FAILED',
  DISCARDED: 'DISCARDED',
};

export interface SettleOptions {
  /** Limits it to that owner's attempts (undefined: operators and the service itself). */
  ownerId?: number;
  /**
   * The runner's fencing token. A runner's claim on an attempt lasts until the attempt's deadline; after
   * that the attempt is UNKNOWN and belongs to reconciliation and operators. The write happens only if
   * the attempt carries this token and its deadline has not passed; otherwise LeaseLostError, nothing
   * written. (Within the lease a result follows the usual rules: a cancelled attempt's may still win.)
   */
  fence?: number;
  usageTokens?: number;
  providerRequestId?: string;
}

/** The runner's claim on the attempt no longer holds: its deadline passed while the provider had it. */
export class LeaseLostError extends Error {
  constructor(readonly attempt: Attempt) {
    super(`the claim on attempt ${attempt.id} (now ${attempt.state}) ended at its deadline ${attempt.deadlineAt.toISOString()}`);
  }
}

/** Settles one attempt with a result or an error. `source` names who delivered it, for the log. */
export async function settleAttempt(
  core: Core,
  attemptId: string,
  outcome: AttemptOutcome,
  source: string,
  options: SettleOptions = {},
): Promise<Settlement> {
  const settlement = await inTransaction(core.pool, (client) => settleAttemptWithin(client, core, attemptId, outcome, options));
  logSettlement(core, settlement, source);
  return settlement;
}

/** Logs what only becomes true at commit: call it after the transaction that settled. */
export function logSettlement(core: Core, settlement: Settlement, source: string): void {
  if (settlement.loss) {
    const { loss } = settlement;
    core.log.warn(
      { event: 'result_discarded', source, ...loss },
      `late result of attempt ${loss.loserAttemptNumber} of job ${loss.jobId} discarded: ${loss.reason}`,
    );
  }
}

/**
 * settleAttempt's work inside a transaction the caller owns (e.g. together with recording a webhook
 * delivery, so both commit or neither). The caller logs with logSettlement after commit.
 */
export async function settleAttemptWithin(
  client: PoolClient,
  core: Core,
  attemptId: string,
  outcome: AttemptOutcome,
  options: SettleOptions = {},
): Promise<Settlement> {
  const job = await lockJobOfAttempt(client, attemptId, options.ownerId);
  if (!job) throw notFound('attempt', attemptId);
  // Read under the job's lock: nothing else can move this attempt until we commit.
  const attempt = (await findAttempt(client, attemptId))!;
  if (options.fence !== undefined && (attempt.leaseToken !== options.fence || core.clock.now() >= attempt.deadlineAt)) {
    throw new LeaseLostError(attempt);
  }
  const settled = OUTCOME_OF_FINAL_STATE[attempt.state];
  if (settled) return { attempt, jobId: job.id, outcome: settled, changed: false };

  const extra = { usageTokens: options.usageTokens, providerRequestId: options.providerRequestId };
  if ('error' in outcome) return fail(client, core, job, attempt, outcome.error, extra);
  const check = checkOutput(OPERATIONS.get(job.operation)!, job.input, outcome.result);
  if (!check.ok) return fail(client, core, job, attempt, check.reason, extra);
  return complete(client, core, job, attempt, outcome.result, extra);
}

/** A definitive failure: FAILED, then (for an attempt that was live) the next fallback or JOB_FAILED. */
type Extra = { usageTokens?: number; providerRequestId?: string };

async function fail(client: PoolClient, core: Core, job: Job, attempt: Attempt, reason: string, extra: Extra): Promise<Settlement> {
  const now = core.clock.now();
  const failed = (await moveAttempt(client, { id: attempt.id, to: 'FAILED', now, error: reason, ...extra }))!;
  const failureEvent = { type: 'ATTEMPT_FAILED' as const, attemptId: attempt.id, message: reason };
  // A CANCELLED attempt was already resolved out of band, and a closed job takes no new attempt:
  // its late failure is recorded, nothing is started.
  if (isLive(attempt.state) && !job.completedBy && !job.cancelledAt) {
    await fallOverAfterFailure(client, core, job, failureEvent);
  } else {
    await appendEvents(client, job.id, now, [failureEvent]);
  }
  return { attempt: failed, jobId: job.id, outcome: 'FAILED', changed: true };
}

/** Rules 11, 12: the compare-and-swap decides; the loser is DISCARDED, logged and streamed. */
async function complete(client: PoolClient, core: Core, job: Job, attempt: Attempt, result: unknown, extra: Extra): Promise<Settlement> {
  const now = core.clock.now();
  const version = await completeJobIfStillOpen(client, { jobId: job.id, readVersion: attempt.readVersion, attemptId: attempt.id, result });
  if (version !== undefined) {
    const won = (await moveAttempt(client, { id: attempt.id, to: 'SUCCEEDED', now, ...extra }))!;
    await appendEvents(client, job.id, now, [
      { type: 'ATTEMPT_SUCCEEDED', attemptId: attempt.id, message: `attempt ${attempt.number} returned a result` },
      { type: 'JOB_SUCCEEDED', attemptId: attempt.id, message: `attempt ${attempt.number} won; version ${version}` },
    ]);
    // The debit and the job.succeeded notification commit with the win, or not at all.
    await recordJobSucceeded(client, core, job, won, version, result);
    return { attempt: won, jobId: job.id, outcome: 'WON', changed: true };
  }
  const reason = job.completedBy
    ? `attempt ${job.completedBy} had already won`
    : job.cancelledAt
      ? 'the job was cancelled'
      : `the job's version moved from ${attempt.readVersion} to ${job.version}`;
  const discarded = (await moveAttempt(client, { id: attempt.id, to: 'DISCARDED', now, ...extra }))!;
  await recordRaceLoss(client, {
    jobId: job.id,
    loserAttemptId: attempt.id,
    winnerAttemptId: job.completedBy,
    loserReadVersion: attempt.readVersion,
    jobVersion: job.version,
    reason,
    payload: result,
    now,
  });
  await appendEvents(client, job.id, now, [
    { type: 'ATTEMPT_DISCARDED', attemptId: attempt.id, message: `late result discarded: ${reason}` },
  ]);
  return {
    attempt: discarded,
    jobId: job.id,
    outcome: 'DISCARDED',
    changed: true,
    loss: {
      jobId: job.id,
      loserAttemptId: attempt.id,
      loserAttemptNumber: attempt.number,
      winnerAttemptId: job.completedBy,
      readVersion: attempt.readVersion,
      jobVersion: job.version,
      reason,
    },
  };
}
