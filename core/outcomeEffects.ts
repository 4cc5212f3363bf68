// Outcome effects (CONTRACT.md section 8): what a job reaching SUCCEEDED, FAILED or CANCELLED causes
// outside the job itself — a usage debit, a callback notification. Each effect has its own effect key
// and its own record, and is written in the transaction of the change that causes it (the caller holds
// the job's lock). So an effect exists exactly when its cause committed: a rolled-back or retried
// transaction leaves none, and none can be missed by a crash between "job done" and "effect recorded".
// Delivery of a notification happens later, outside any job transaction (core/callbackDelivery.ts):
// a slow or failing callback never holds a job lock, never blocks the debit, never causes a second one.
import { DEFAULT_SENDER_RETRY_WINDOW_SECONDS } from '../config.ts';
import type { PoolClient } from '../db/pool.ts';
import { enqueueCallback } from '../db/outbox.ts';
import type { Attempt, Job } from '../db/rows.ts';
import { insertUsageDebit } from '../db/usage.ts';
import type { Core } from './core.ts';

export type OutcomeStatus = 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

/** The debit's key: one per job, whichever attempt wins. */
export const chargeEffectKey = (jobId: string) => `job:${jobId}:charge`;
/** The notification's key, also its webhook-id and Idempotency-Key: one per job and outcome. */
export const notificationEffectKey = (jobId: string, status: OutcomeStatus) => `job:${jobId}:${status.toLowerCase()}`;

/** The callback body, as documented; its JSON text is stored and signed as is. */
export interface CallbackBody {
  type: 'job.succeeded' | 'job.failed' | 'job.cancelled';
  jobId: string;
  idempotencyKey: string;
  status: OutcomeStatus;
  version: number;
  result: unknown;
}

/**
 * After the winning compare-and-swap, in its transaction: debit the owner once and queue the
 * job.succeeded notification. `won` is the winning attempt as just written (its usage_tokens included);
 * `version` the job's version after the swap.
 */
export async function recordJobSucceeded(client: PoolClient, core: Core, job: Job, won: Attempt, version: number, result: unknown): Promise<void> {
  const now = core.clock.now();
  await insertUsageDebit(client, {
    effectKey: chargeEffectKey(job.id),
    ownerId: job.ownerId,
    jobId: job.id,
    attemptId: won.id,
    // The provider's reported token count; 1 where it reported none. A reported 0 is charged 1 too:
    // a debit of nothing is no debit, and units > 0 is a constraint of the ledger.
    units: won.usageTokens && won.usageTokens > 0 ? won.usageTokens : 1,
    at: now,
  });
  await queueNotification(client, core, job, 'SUCCEEDED', version, result, now);
}

/** After JOB_FAILED, in its transaction. The version does not move on a failure (rule 15). */
export async function recordJobFailed(client: PoolClient, core: Core, job: Job): Promise<void> {
  await queueNotification(client, core, job, 'FAILED', job.version, null, core.clock.now());
}

/** After JOB_CANCELLED, in its transaction; `version` is the job's version after the cancel. */
export async function recordJobCancelled(client: PoolClient, core: Core, job: Job, version: number): Promise<void> {
  await queueNotification(client, core, job, 'CANCELLED', version, null, core.clock.now());
}

/**
 * Captures the body as it stands now (a later change of the job does not alter what was announced)
 * and the owner's current callback. The key is kept 3 × the sender retry window, after which a
 * sweeper may delete it; an outcome reached again within that time (a job failing again after
 * retryJob) is not notified again.
 */
async function queueNotification(
  client: PoolClient,
  core: Core,
  job: Job,
  status: OutcomeStatus,
  version: number,
  result: unknown,
  now: Date,
): Promise<void> {
  const body: CallbackBody = {
    type: `job.${status.toLowerCase() as Lowercase<OutcomeStatus>}`,
    jobId: job.id,
    idempotencyKey: job.idempotencyKey,
    status,
    version,
    result: result ?? null,
  };
  // Defensive `?.`: a Config built by hand rather than parsed may lack the section.
  const windowMs = (core.config.effects?.senderRetryWindowSeconds ?? DEFAULT_SENDER_RETRY_WINDOW_SECONDS) * 1000;
  await enqueueCallback(client, {
    effectKey: notificationEffectKey(job.id, status),
    ownerId: job.ownerId,
    jobId: job.id,
    body: JSON.stringify(body),
    now,
    expiresAt: new Date(now.getTime() + 3 * windowMs),
  });
}
