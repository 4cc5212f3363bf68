// What an authenticated, well-formed inbound result webhook does (CONTRACT.md section 8): at most one
// state change per natural key (provider, requestId, status), however often and however concurrently
// the sender delivers it, and whatever webhook-id it puts on each delivery.
import { z } from 'zod';
import type { Core } from '../core/core.ts';
import { DomainError } from '../core/errors.ts';
import { logSettlement, settleAttemptWithin, type AttemptOutcome, type Settlement } from '../core/settleAttempt.ts';
import { findAttempt } from '../db/attempts.ts';
import { inTransaction } from '../db/tx.ts';
import {
  claimDelivery,
  findDelivery,
  recordDeliveryOutcome,
  type DeliveryKey,
  type DeliveryOutcome,
} from '../db/webhookDeliveries.ts';

const UUID = z.uuid();

/** A key is remembered for this many sender retry windows (as idempotency keys are, rule 5). */
export const DEDUP_KEY_LIFETIME_IN_RETRY_WINDOWS = 3;

/** How often a claim that found the key held, but then no row, is tried again (only a purge in between does that). */
const MAX_CLAIM_TRIES = 3;

export type ResultDelivery = {
  provider: string;
  attemptId: string;
  requestId: string;
  webhookId: string;
  /** The provider's senderRetryWindowSeconds. */
  retryWindowSeconds: number;
} & ({ status: 'succeeded'; result: unknown } | { status: 'failed'; error: string });

export interface DeliveryAnswer {
  outcome: DeliveryOutcome;
  duplicate: boolean;
  /** When the natural key is forgotten: until then every redelivery is a duplicate. */
  expiresAt: Date;
}

/** An expected refusal of a delivery; the HTTP layer turns it into its status and JSON error. */
export class DeliveryRefused extends Error {
  constructor(
    readonly status: 404 | 409,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'DeliveryRefused';
  }
}

const attemptNotFound = (d: ResultDelivery) =>
  new DeliveryRefused(404, 'NOT_FOUND', `No attempt ${d.attemptId} of provider "${d.provider}". Check attemptId and the URL's provider.`);

/**
 * Records and applies one delivery in one transaction. A new key settles the attempt exactly as
 * reportAttemptResult would and stores the outcome with the key; a key already held changes nothing
 * and answers the outcome stored by the first delivery. A refusal (DeliveryRefused) rolls back
 * everything, the key's claim included, so the sender may deliver it again.
 */
export async function acceptResultDelivery(core: Core, d: ResultDelivery): Promise<DeliveryAnswer> {
  const key: DeliveryKey = { provider: d.provider, requestId: d.requestId, status: d.status };
  const outcome: AttemptOutcome = d.status === 'succeeded' ? { result: d.result } : { error: d.error };
  // Attempt ids are UUIDs: anything else names no attempt (as reportAttemptResult answers), and would
  // only make Postgres refuse the statement.
  if (!UUID.safeParse(d.attemptId).success) throw attemptNotFound(d);

  // inTransaction may run the function again after a deadlock: everything it decides is in its answer.
  type Decided = { answer: DeliveryAnswer; settlement?: Settlement };
  const { answer, settlement } = await inTransaction(core.pool, async (client): Promise<Decided> => {
    // An attempt's provider never changes (a trigger refuses it), so reading it before any lock is safe.
    // Checked before the claim: a delivery for an attempt that is not this provider's holds no key.
    const attempt = await findAttempt(client, d.attemptId);
    if (!attempt || attempt.provider !== d.provider) throw attemptNotFound(d);

    for (let tries = 1; ; tries++) {
      const receivedAt = core.clock.now();
      const expiresAt = new Date(receivedAt.getTime() + DEDUP_KEY_LIFETIME_IN_RETRY_WINDOWS * d.retryWindowSeconds * 1000);
      // The primary key is the only arbiter of "first": no read decides it. A concurrent duplicate
      // blocks here until this transaction commits (then it gets no row) or rolls back (then it claims).
      const claimed = await claimDelivery(client, { ...key, attemptId: d.attemptId, receivedAt, expiresAt, webhookId: d.webhookId });
      if (claimed) {
        let settlement: Settlement;
        try {
          settlement = await settleAttemptWithin(client, core, d.attemptId, outcome);
        } catch (err) {
          // Rolled back with the claim: a 404 leaves no key behind.
          if (err instanceof DomainError && err.code === 'NOT_FOUND') throw attemptNotFound(d);
          throw err;
        }
        await recordDeliveryOutcome(client, key, settlement.outcome);
        return { answer: { outcome: settlement.outcome, duplicate: false, expiresAt }, settlement };
      }
      // A new statement, so a new snapshot: it sees the holder the claim waited for.
      const held = await findDelivery(client, key);
      if (held) {
        if (held.attemptId !== d.attemptId) {
          throw new DeliveryRefused(
            409,
            'REQUEST_ID_REUSED',
            `requestId "${d.requestId}" with status "${d.status}" was already delivered for attempt ${held.attemptId}, ` +
              `not ${d.attemptId}. Send each result under its own requestId.`,
          );
        }
        // outcome is set: the database refuses to commit a claimed row without one.
        return { answer: { outcome: held.outcome!, duplicate: true, expiresAt: held.expiresAt } };
      }
      // Held when the claim ran, gone now: an expired key was purged in between. Claim again.
      if (tries >= MAX_CLAIM_TRIES) throw new Error(`webhook delivery key ${JSON.stringify(key)} kept vanishing`);
    }
  });

  // Only true after commit: a discarded late result is logged as reportAttemptResult logs it.
  if (settlement) logSettlement(core, settlement, `webhook from ${d.provider}`);
  core.log.info(
    {
      event: answer.duplicate ? 'webhook_duplicate' : 'webhook_settled',
      provider: d.provider,
      requestId: d.requestId,
      status: d.status,
      attemptId: d.attemptId,
      webhookId: d.webhookId,
      outcome: answer.outcome,
      changed: settlement?.changed,
    },
    answer.duplicate
      ? `duplicate webhook from ${d.provider} for attempt ${d.attemptId} (request ${d.requestId}, ${d.status}): nothing changed`
      : `webhook from ${d.provider} settled attempt ${d.attemptId}: ${answer.outcome}`,
  );
  return answer;
}
