// retryJob (rule 8): a new attempt under the same job, never a new job.
import { ONE_LIVE_ATTEMPT_CONSTRAINT } from '../db/attempts.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { lockJob } from '../db/jobs.ts';
import type { Attempt } from '../db/rows.ts';
import { inTransaction } from '../db/tx.ts';
import { visibleOwner, type Caller } from './caller.ts';
import type { Core } from './core.ts';
import { DomainError, notFound } from './errors.ts';
import { startAttempt } from './attemptLifecycle.ts';

export async function retryJob(core: Core, caller: Caller, jobId: string, provider?: string | null): Promise<Attempt> {
  try {
    return await inTransaction(core.pool, async (client) => {
      const job = await lockJob(client, jobId, visibleOwner(caller));
      if (!job) throw notFound('job', jobId);
      const chosen = provider ?? job.provider;
      if (chosen !== job.provider && !job.fallbackProviders.includes(chosen)) {
        throw new DomainError(
          'PROVIDER_NOT_ALLOWED',
          `Provider "${chosen}" is not this job's provider or one of its fallbacks (${[job.provider, ...job.fallbackProviders].join(', ')}).`,
          { field: 'provider' },
        );
      }
      if (!core.providers.get(chosen)) {
        throw new DomainError('UNKNOWN_PROVIDER', `Provider "${chosen}" is no longer configured.`, { field: 'provider' });
      }
      if (chosen !== job.provider && !(await core.providers.isCertified(client, chosen, job.operation))) {
        throw new DomainError(
          'PROVIDER_NOT_CERTIFIED',
          `Fallback "${chosen}" has no passing contract certification for ${job.operation}. Certify it first, or retry on the primary.`,
          { field: 'provider' },
        );
      }
      const attempt = await startAttempt(client, core, job, chosen);
      if (!attempt) {
        throw new DomainError('JOB_CLOSED', `Job ${job.id} is ${job.completedBy ? 'SUCCEEDED' : 'CANCELLED'}; it takes no more attempts.`, {
          jobId: job.id,
        });
      }
      return attempt;
    });
  } catch (err) {
    if (isUniqueViolation(err, ONE_LIVE_ATTEMPT_CONSTRAINT)) {
      throw new DomainError(
        'ATTEMPT_IN_FLIGHT',
        `Job ${jobId} has a live attempt (STARTING, RUNNING or UNKNOWN). Wait for its outcome, or have an operator cancel it, then retry.`,
        { jobId },
      );
    }
    throw err;
  }
}
