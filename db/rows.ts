// The shapes the database answers with, mapped once from snake_case rows to the domain's names.
import type { AttemptState, JobEventType, JobStatus } from './states.ts';

export interface Attempt {
  id: string;
  jobId: string;
  number: number;
  provider: string;
  state: AttemptState;
  readVersion: number;
  error: string | null;
  startedAt: Date;
  deadlineAt: Date;
  finishedAt: Date | null;
  /** The instance that sent it to its provider, and the fencing token of that claim. */
  dispatchedBy: string | null;
  leaseToken: number | null;
  /** The provider's own id for the request, where it gave one. */
  providerRequestId: string | null;
  promptTokens: number | null;
  usageTokens: number | null;
}

export interface Job {
  id: string;
  ownerId: number;
  idempotencyKey: string;
  operation: string;
  provider: string;
  fallbackProviders: string[];
  input: unknown;
  attemptTimeoutMs: number | null;
  fingerprint: string;
  version: number;
  result: unknown;
  completedBy: string | null;
  cancelledAt: Date | null;
  createdAt: Date;
  keyExpiresAt: Date;
}

/** A job as clients see it: with its derived status and its attempts in number order. */
export interface JobView extends Job {
  status: JobStatus;
  attempts: Attempt[];
}

export interface JobEvent {
  jobId: string;
  seq: number;
  type: JobEventType;
  jobStatus: JobStatus;
  attemptId: string | null;
  attemptNumber: number | null;
  attemptState: AttemptState | null;
  provider: string | null;
  message: string | null;
  at: Date;
}

type Row = Record<string, unknown>;

const date = (v: unknown): Date => (v instanceof Date ? v : new Date(v as string));
const dateOrNull = (v: unknown): Date | null => (v == null ? null : date(v));

/** From a row or from to_jsonb(attempts) (where times are strings). */
export function toAttempt(r: Row): Attempt {
  return {
    id: r.id as string,
    jobId: r.job_id as string,
    number: r.number as number,
    provider: r.provider as string,
    state: r.state as AttemptState,
    readVersion: r.read_version as number,
    error: (r.error as string | null) ?? null,
    startedAt: date(r.started_at),
    deadlineAt: date(r.deadline_at),
    finishedAt: dateOrNull(r.finished_at),
    dispatchedBy: (r.dispatched_by as string | null) ?? null,
    leaseToken: r.lease_token == null ? null : Number(r.lease_token),
    providerRequestId: (r.provider_request_id as string | null) ?? null,
    promptTokens: (r.prompt_tokens as number | null) ?? null,
    usageTokens: (r.usage_tokens as number | null) ?? null,
  };
}

export function toJob(r: Row): Job {
  return {
    id: r.id as string,
    ownerId: r.owner_id as number,
    idempotencyKey: r.idempotency_key as string,
    operation: r.operation as string,
    provider: r.provider as string,
    fallbackProviders: r.fallback_providers as string[],
    input: r.input,
    attemptTimeoutMs: (r.attempt_timeout_ms as number | null) ?? null,
    fingerprint: r.fingerprint as string,
    version: r.version as number,
    result: r.result ?? null,
    completedBy: (r.completed_by as string | null) ?? null,
    cancelledAt: dateOrNull(r.cancelled_at),
    createdAt: date(r.created_at),
    keyExpiresAt: date(r.key_expires_at),
  };
}

export function toJobView(r: Row): JobView {
  return { ...toJob(r), status: r.status as JobStatus, attempts: (r.attempts as Row[]).map(toAttempt) };
}

export function toJobEvent(r: Row): JobEvent {
  return {
    jobId: r.job_id as string,
    seq: r.seq as number,
    type: r.type as JobEventType,
    jobStatus: r.job_status as JobStatus,
    attemptId: (r.attempt_id as string | null) ?? null,
    attemptNumber: (r.attempt_number as number | null) ?? null,
    attemptState: (r.attempt_state as AttemptState | null) ?? null,
    provider: (r.provider as string | null) ?? null,
    message: (r.message as string | null) ?? null,
    at: date(r.at),
  };
}
