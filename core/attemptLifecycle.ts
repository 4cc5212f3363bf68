// Starting attempts and what follows a definitive failure: the shared steps of createJob's siblings
// (retryJob, reportAttemptResult, the deadline sweep). Every function here runs inside a transaction
// that already holds the job's lock.
import { randomUUID } from 'node:crypto';
import { findAttemptsOfJob, insertNextAttempt } from '../db/attempts.ts';
import { appendEvents, type NewEvent } from '../db/events.ts';
import type { PoolClient } from '../db/pool.ts';
import type { Attempt, Job } from '../db/rows.ts';
import type { Core } from './core.ts';
import { recordJobFailed } from './outcomeEffects.ts';

/**
 * Inserts the job's next attempt on `provider` and its events. Answers undefined when the job is
 * closed. Throws the database's unique violation when an attempt is live (the caller maps it).
 */
export async function startAttempt(
  client: PoolClient,
  core: Core,
  job: Job,
  provider: string,
  leadingEvents: NewEvent[] = [],
): Promise<Attempt | undefined> {
  const now = core.clock.now();
  const atOnce = core.providers.dispatchesAtOnce(provider);
  const attempt = await insertNextAttempt(client, {
    id: randomUUID(),
    jobId: job.id,
    provider,
    state: atOnce ? 'RUNNING' : 'STARTING',
    now,
    timeoutMs: job.attemptTimeoutMs ?? core.providers.timeoutMs(provider),
  });
  if (!attempt) return undefined;
  await appendEvents(client, job.id, now, [
    ...leadingEvents,
    { type: 'ATTEMPT_STARTED', attemptId: attempt.id, attemptState: 'STARTING' },
    ...(atOnce ? [{ type: 'ATTEMPT_RUNNING' as const, attemptId: attempt.id, attemptState: 'RUNNING' as const }] : []),
  ]);
  return attempt;
}

/**
 * Rule 10, after `failed` has become FAILED in this transaction: start the first untried fallback that
 * is certified (or manual), saying FALLBACK_BLOCKED for each uncertified one passed over; with none
 * left the job is FAILED. `failureEvent` is the ATTEMPT_FAILED event, appended first.
 */
export async function fallOverAfterFailure(client: PoolClient, core: Core, job: Job, failureEvent: NewEvent): Promise<Attempt | undefined> {
  const tried = new Set((await findAttemptsOfJob(client, job.id)).map((a) => a.provider));
  const events: NewEvent[] = [failureEvent];
  for (const provider of job.fallbackProviders) {
    if (tried.has(provider)) continue;
    if (!core.providers.get(provider)) {
      events.push({ type: 'FALLBACK_BLOCKED', provider, message: `fallback ${provider} is no longer configured` });
      continue;
    }
    if (!(await core.providers.isCertified(client, provider, job.operation))) {
      events.push({
        type: 'FALLBACK_BLOCKED',
        provider,
        message: `fallback ${provider} has no passing contract certification for ${job.operation}; certify it, then retryJob`,
      });
      continue;
    }
    return startAttempt(client, core, job, provider, events);
  }
  events.push({ type: 'JOB_FAILED', message: 'no certified fallback provider left; retryJob may start another attempt' });
  await appendEvents(client, job.id, core.clock.now(), events);
  await recordJobFailed(client, core, job); // the job.failed notification, once per job
  return undefined;
}
