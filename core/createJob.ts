// createJob: one intent, one job (rules 1–6).
import { randomUUID } from 'node:crypto';
import { claimKeyAndCreateJob, findJobHoldingKey, takeOverExpiredKey, type NewJob } from '../db/jobs.ts';
import type { JobView } from '../db/rows.ts';
import { OPERATIONS, checkInput } from '../providers/operations/index.ts';
import type { Caller } from './caller.ts';
import type { Core } from './core.ts';
import { DomainError, badInput } from './errors.ts';
import { requestFingerprint } from './fingerprint.ts';

export interface CreateJobRequest {
  idempotencyKey: string;
  operation: string;
  provider: string;
  fallbackProviders?: string[] | null;
  input: unknown;
  attemptTimeoutMs?: number | null;
}

export const IDEMPOTENCY_KEY_MAX_CHARS = 255;
// C0, DEL and C1 control characters: invisible in logs and UIs, so two keys that look equal may differ.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;
// A UTF-16 surrogate without its pair is not a character: the database stores it as U+FFFD, so two
// different keys (e.g. "a\uD800" and "a\uDC00") would silently become the same key.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** A key held by a request that commits while ours runs is read again; more than this is a bug. */
const MAX_CLAIM_TRIES = 3;

export function idempotencyKeyProblem(key: string): string | undefined {
  const chars = [...key].length;
  if (chars < 1) return 'must not be empty';
  if (chars > IDEMPOTENCY_KEY_MAX_CHARS) return `must be at most ${IDEMPOTENCY_KEY_MAX_CHARS} characters (got ${chars})`;
  if (CONTROL_CHARACTERS.test(key)) return 'must not contain control characters';
  if (LONE_SURROGATE.test(key)) return 'must be well-formed Unicode (it contains an unpaired surrogate)';
  return undefined;
}

export async function createJob(core: Core, caller: Caller, req: CreateJobRequest): Promise<{ job: JobView; replayed: boolean }> {
  const keyProblem = idempotencyKeyProblem(req.idempotencyKey);
  if (keyProblem) throw badInput('input.idempotencyKey', keyProblem);
  const operation = OPERATIONS.get(req.operation);
  if (!operation) {
    throw new DomainError('UNKNOWN_OPERATION', `No operation "${req.operation}". Use one of: ${[...OPERATIONS.keys()].join(', ')}.`, {
      field: 'input.operation',
    });
  }
  const fallbackProviders = req.fallbackProviders ?? [];
  for (const [i, name] of [req.provider, ...fallbackProviders].entries()) {
    if (!core.providers.get(name)) {
      throw new DomainError('UNKNOWN_PROVIDER', `No provider "${name}". Use one of: ${core.providers.names().join(', ')}.`, {
        field: i === 0 ? 'input.provider' : `input.fallbackProviders.${i - 1}`,
      });
    }
  }
  if (new Set([req.provider, ...fallbackProviders]).size !== fallbackProviders.length + 1) {
    throw badInput('input.fallbackProviders', 'must not repeat a provider or name the primary provider');
  }
  const attemptTimeoutMs = req.attemptTimeoutMs ?? null;
  if (attemptTimeoutMs !== null && !(Number.isInteger(attemptTimeoutMs) && attemptTimeoutMs >= 100 && attemptTimeoutMs <= 3_600_000)) {
    throw badInput('input.attemptTimeoutMs', 'must be an integer from 100 to 3600000');
  }
  const inputCheck = checkInput(operation, req.input);
  if (!inputCheck.ok) throw badInput(inputCheck.field, inputCheck.reason);

  const fingerprint = requestFingerprint({
    operation: req.operation,
    provider: req.provider,
    fallbackProviders,
    input: req.input,
    attemptTimeoutMs,
  });

  for (let tries = 1; tries <= MAX_CLAIM_TRIES; tries++) {
    const now = core.clock.now();
    const request: NewJob = {
      ownerId: caller.ownerId,
      idempotencyKey: req.idempotencyKey,
      jobId: randomUUID(),
      attemptId: randomUUID(),
      operation: req.operation,
      provider: req.provider,
      fallbackProviders,
      input: req.input,
      attemptTimeoutMs,
      fingerprint,
      now,
      keyExpiresAt: new Date(now.getTime() + 3 * core.config.idempotency.senderRetryWindowSeconds * 1000),
      attemptState: core.providers.dispatchesAtOnce(req.provider) ? 'RUNNING' : 'STARTING',
      attemptDeadlineMs: attemptTimeoutMs ?? core.providers.timeoutMs(req.provider),
    };
    let claim = await claimKeyAndCreateJob(core.pool, request);
    if (claim.kind === 'expired') claim = await takeOverExpiredKey(core.pool, request);
    const job =
      claim.kind === 'held-unseen' || claim.kind === 'expired'
        ? await findJobHoldingKey(core.pool, caller.ownerId, req.idempotencyKey, now)
        : claim.job;
    if (!job) continue; // the holder's key expired between the two statements: claim again
    if (claim.kind === 'created') return { job, replayed: false };
    if (job.fingerprint !== fingerprint) {
      throw new DomainError(
        'IDEMPOTENCY_KEY_REUSED',
        `The idempotency key is already held by job ${job.id}, created with a different request. ` +
          `Send the same request to get that job back, or use a new key for a new intent.`,
        { jobId: job.id, field: 'input.idempotencyKey' },
      );
    }
    return { job, replayed: true };
  }
  throw new Error(`could not claim or read idempotency key after ${MAX_CLAIM_TRIES} tries`);
}
