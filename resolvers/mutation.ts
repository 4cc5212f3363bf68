import { z } from 'zod';
import { cancelAttempt, cancelJob } from '../core/cancel.ts';
import { createJob, idempotencyKeyProblem } from '../core/createJob.ts';
import { notFound } from '../core/errors.ts';
import { retryJob } from '../core/retryJob.ts';
import { settleAttempt, type AttemptOutcome } from '../core/settleAttempt.ts';
import { findJob } from '../db/jobs.ts';
import type { Attempt, JobView } from '../db/rows.ts';
import { builder } from '../schema/builder.ts';
import { ReportOutcomeEnum } from '../schema/enums.ts';
import { textProblem } from '../schema/scalars.ts';
import { DomainError } from '../core/errors.ts';
import { setResponseHeader } from '../schema/responseHeaders.ts';
import { requireOperator } from './access.ts';

const UUID = z.uuid();
/** Free text stored as is (a cancel reason, a reported error): the database must be able to store it. */
const storableText = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .superRefine((text, ctx) => {
      const problem = textProblem(text);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    });
const asUuid = (id: string | number, what: string) => {
  if (!UUID.safeParse(String(id)).success) throw notFound(what, String(id));
  return String(id);
};

const CreateJobInput = builder.inputType('CreateJobInput', {
  fields: (t) => ({
    idempotencyKey: t.string({
      required: true,
      description: '1..255 characters, no control characters; unique per owner until keyExpiresAt',
      validate: z.string().superRefine((key, ctx) => {
        const problem = idempotencyKeyProblem(key);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    }),
    operation: t.string({ required: true, description: 'A registered operation, e.g. "summarize"' }),
    provider: t.string({ required: true }),
    fallbackProviders: t.stringList({ description: 'Default []' }),
    input: t.field({ type: 'JSON', required: true, description: "Checked against the operation's input schema" }),
    attemptTimeoutMs: t.int({
      description: "100..3600000; default: the provider's timeoutMs",
      validate: z.number().int().min(100).max(3_600_000),
    }),
  }),
});

const CreateJobPayload = builder.objectRef<{ job: JobView; replayed: boolean }>('CreateJobPayload').implement({
  fields: (t) => ({
    job: t.field({ type: 'Job', resolve: (p) => p.job }),
    replayed: t.exposeBoolean('replayed', { description: 'True when the key was already held and this is that job' }),
  }),
});

const ReportAttemptResultPayload = builder
  .objectRef<{ attempt: Attempt; job: JobView; outcome: 'WON' | 'DISCARDED' | 'FAILED' }>('ReportAttemptResultPayload')
  .implement({
    fields: (t) => ({
      attempt: t.field({ type: 'Attempt', resolve: (p) => p.attempt }),
      job: t.field({ type: 'Job', resolve: (p) => p.job }),
      outcome: t.field({ type: ReportOutcomeEnum, resolve: (p) => p.outcome }),
    }),
  });

builder.mutationType({
  fields: (t) => ({
    createJob: t.field({
      type: CreateJobPayload,
      args: { input: t.arg({ type: CreateJobInput, required: true }) },
      resolve: async (_, { input }, { core, caller, request }) => {
        // One identity at every layer: an Idempotency-Key header (from the client or a proxy in front)
        // must name the same intent as the input, or the request is refused before anything is written.
        const header = request?.headers.get('idempotency-key');
        if (header != null && header !== input.idempotencyKey) {
          throw new DomainError('BAD_USER_INPUT', 'The Idempotency-Key header and input.idempotencyKey differ; send the same key in both, or only one.', {
            field: 'input.idempotencyKey',
          });
        }
        const answer = await createJob(core, caller, { ...input, input: input.input });
        if (answer.replayed) setResponseHeader(request, 'Idempotent-Replayed', 'true');
        return answer;
      },
    }),
    retryJob: t.field({
      type: 'Attempt',
      description: 'Starts a new attempt under the job; omitted provider: the primary',
      args: { jobId: t.arg.id({ required: true }), provider: t.arg.string() },
      resolve: (_, { jobId, provider }, { core, caller }) => retryJob(core, caller, asUuid(jobId, 'job'), provider),
    }),
    cancelJob: t.field({
      type: 'Job',
      args: { jobId: t.arg.id({ required: true }) },
      resolve: (_, { jobId }, { core, caller }) => cancelJob(core, caller, asUuid(jobId, 'job')),
    }),
    cancelAttempt: t.field({
      type: 'Attempt',
      description: 'Operators: resolve a live attempt out of band',
      args: {
        attemptId: t.arg.id({ required: true }),
        reason: t.arg.string({ required: true, validate: storableText(1000) }),
      },
      resolve: (_, { attemptId, reason }, { core, caller }) => {
        requireOperator(caller, 'cancelAttempt');
        return cancelAttempt(core, caller, asUuid(attemptId, 'attempt'), reason);
      },
    }),
    reportAttemptResult: t.field({
      type: ReportAttemptResultPayload,
      description: 'Operators: deliver an attempt’s result or error. A duplicate delivery answers the first outcome.',
      args: {
        attemptId: t.arg.id({ required: true }),
        result: t.arg({ type: 'JSON' }),
        error: t.arg.string({ validate: storableText(10_000) }),
      },
      resolve: async (_, { attemptId, result, error }, { core, caller }) => {
        requireOperator(caller, 'reportAttemptResult');
        const hasResult = result !== undefined && result !== null;
        if (hasResult === (error != null)) {
          throw new DomainError('BAD_USER_INPUT', 'Give exactly one of result and error.', { field: hasResult ? 'error' : 'result' });
        }
        const outcome: AttemptOutcome = hasResult ? { result } : { error: error! };
        const settled = await settleAttempt(core, asUuid(attemptId, 'attempt'), outcome, `operator ${caller.ownerName}`);
        // The attempt as the settling transaction left it; the job as it stands now (with its attempts).
        const job = await findJob(core.pool, settled.jobId, undefined);
        return { attempt: settled.attempt, job: job!, outcome: settled.outcome };
      },
    }),
  }),
});
