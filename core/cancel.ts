// cancelJob (rule 14) and cancelAttempt (out of band, operators).
import { findAttempt, findLiveAttempt, moveAttempt } from '../db/attempts.ts';
import { appendEvents, type NewEvent } from '../db/events.ts';
import { cancelJobIfOpen, findJob, lockJob, lockJobOfAttempt } from '../db/jobs.ts';
import type { Attempt, JobView } from '../db/rows.ts';
import { LIVE_ATTEMPT_STATES } from '../db/states.ts';
import { inTransaction } from '../db/tx.ts';
import { visibleOwner, type Caller } from './caller.ts';
import type { Core } from './core.ts';
import { DomainError, notFound } from './errors.ts';
import { recordJobCancelled } from './outcomeEffects.ts';

/**
 * Cancels the job: it becomes CANCELLED, its live attempt CANCELLED, and its version moves so that any
 * result still on its way is DISCARDED. Cancelling a cancelled job again answers it unchanged.
 */
export async function cancelJob(core: Core, caller: Caller, jobId: string): Promise<JobView> {
  const cancelledAttempt = await inTransaction(core.pool, async (client): Promise<Attempt | undefined> => {
    const job = await lockJob(client, jobId, visibleOwner(caller));
    if (!job) throw notFound('job', jobId);
    if (job.completedBy) {
      throw new DomainError('JOB_CLOSED', `Job ${jobId} already SUCCEEDED; there is nothing to cancel.`, { jobId });
    }
    const now = core.clock.now();
    const version = await cancelJobIfOpen(client, jobId, now);
    if (version === undefined) return undefined; // already cancelled
    const events: NewEvent[] = [];
    const live = await findLiveAttempt(client, jobId);
    const cancelled = live
      ? await moveAttempt(client, { id: live.id, to: 'CANCELLED', now, error: 'job cancelled', onlyFrom: LIVE_ATTEMPT_STATES })
      : undefined;
    if (cancelled) events.push({ type: 'ATTEMPT_CANCELLED', attemptId: cancelled.id, message: 'job cancelled' });
    events.push({ type: 'JOB_CANCELLED', message: `cancelled by ${caller.ownerName}` });
    await appendEvents(client, jobId, now, events);
    await recordJobCancelled(client, core, job, version); // the job.cancelled notification
    return cancelled;
  });
  if (cancelledAttempt) askProviderToCancel(core, cancelledAttempt);
  return (await findJob(core.pool, jobId, undefined))!;
}

/**
 * Asks the provider to stop working on a cancelled attempt, where it can (after the cancel committed:
 * the cancel stands whatever the provider answers). Its result may still arrive and is then judged
 * like any late result.
 */
function askProviderToCancel(core: Core, attempt: Attempt): void {
  const adapter = core.providers.adapter(attempt.provider);
  if (!adapter?.cancel) return;
  adapter
    .cancel({ attemptId: attempt.id, providerRequestId: attempt.providerRequestId ?? undefined }, AbortSignal.timeout(PROVIDER_CANCEL_TIMEOUT_MS))
    .catch((err: unknown) => core.log.warn({ err, attemptId: attempt.id }, 'the provider could not be asked to cancel'));
}

const PROVIDER_CANCEL_TIMEOUT_MS = 10_000;

/** Resolves a live attempt out of band: it stops blocking the job; a late result may still win. */
export async function cancelAttempt(core: Core, caller: Caller, attemptId: string, reason: string): Promise<Attempt> {
  const cancelled = await inTransaction(core.pool, async (client) => {
    const job = await lockJobOfAttempt(client, attemptId, visibleOwner(caller));
    if (!job) throw notFound('attempt', attemptId);
    const jobId = job.id;
    const now = core.clock.now();
    const cancelled = await moveAttempt(client, {
      id: attemptId,
      to: 'CANCELLED',
      now,
      error: `cancelled: ${reason}`,
      onlyFrom: LIVE_ATTEMPT_STATES,
    });
    if (!cancelled) {
      const state = (await findAttempt(client, attemptId))?.state;
      throw new DomainError('ATTEMPT_NOT_LIVE', `Attempt ${attemptId} is ${state}, not live; only a live attempt can be cancelled.`, {
        attemptId,
        state,
      });
    }
    await appendEvents(client, jobId, now, [
      { type: 'ATTEMPT_CANCELLED', attemptId, message: `cancelled by ${caller.ownerName}: ${reason}` },
    ]);
    return cancelled;
  });
  askProviderToCancel(core, cancelled);
  return cancelled;
}
