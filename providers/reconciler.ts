// Reconciliation: settles UNKNOWN attempts out of band by asking providers that can be asked (an
// adapter with retrieve) what became of the request. A definitive answer settles the attempt exactly
// as a report would — a result may win or be DISCARDED, a failure starts the next certified fallback;
// "still working" or "cannot tell" leaves it UNKNOWN, to be asked again later.
import type { Core } from '../core/core.ts';
import { runPeriodically, type Periodic } from '../core/periodic.ts';
import { settleAttempt } from '../core/settleAttempt.ts';
import { takeUnknownAttemptsToReconcile } from '../db/dispatch.ts';

export const RECONCILE_INTERVAL_MS = 1_000;
/** An attempt is asked again at most this often. */
const ASK_AGAIN_AFTER_MS = 5_000;
const RETRIEVE_TIMEOUT_MS = 10_000;
const BATCH = 20;

/** One pass: asks about every due UNKNOWN attempt; answers how many it settled. */
export async function reconcileUnknownAttempts(core: Core): Promise<number> {
  const askable = core.providers.names().filter((name) => core.providers.adapter(name)?.retrieve);
  if (askable.length === 0) return 0;
  const now = core.clock.now();
  const due = await takeUnknownAttemptsToReconcile(core.pool, {
    providers: askable,
    now,
    askedBefore: new Date(now.getTime() - ASK_AGAIN_AFTER_MS),
    limit: BATCH,
  });
  let settled = 0;
  for (const attempt of due) {
    const adapter = core.providers.adapter(attempt.provider)!;
    const answer = await adapter.retrieve!(
      { attemptId: attempt.id, providerRequestId: attempt.providerRequestId ?? undefined },
      AbortSignal.timeout(RETRIEVE_TIMEOUT_MS),
    ).catch((err: unknown) => ({ kind: 'unknown' as const, reason: String(err) }));
    const source = `reconciliation with ${attempt.provider}`;
    try {
      if (answer.kind === 'result') {
        await settleAttempt(core, attempt.id, { result: answer.output }, source, { usageTokens: answer.usageTokens });
        settled++;
      } else if (answer.kind === 'failed') {
        await settleAttempt(core, attempt.id, { error: `${answer.reason} (found by reconciliation)` }, source);
        settled++;
      } else {
        core.log.debug({ attemptId: attempt.id, answer }, 'reconciliation could not settle the attempt yet');
      }
    } catch (err) {
      core.log.error({ err, attemptId: attempt.id }, 'settling a reconciled attempt failed; it will be asked again');
    }
  }
  return settled;
}

export function startReconciler(core: Core): Periodic {
  return runPeriodically('a reconciliation pass', RECONCILE_INTERVAL_MS, () => reconcileUnknownAttempts(core), core.log);
}
