import { builder } from './builder.ts';
import { AttemptStateEnum, JobEventTypeEnum, JobStatusEnum } from './enums.ts';

builder.objectType('JobEvent', {
  description: 'One change of a job or one of its attempts. seq is 1, 2, 3 … per job, with no gaps.',
  fields: (t) => ({
    seq: t.exposeInt('seq'),
    type: t.expose('type', { type: JobEventTypeEnum }),
    jobId: t.exposeID('jobId'),
    jobStatus: t.expose('jobStatus', { type: JobStatusEnum, description: "The job's status once this change committed" }),
    attemptId: t.exposeID('attemptId', { nullable: true }),
    attemptNumber: t.exposeInt('attemptNumber', { nullable: true }),
    attemptState: t.expose('attemptState', { type: AttemptStateEnum, nullable: true }),
    provider: t.exposeString('provider', { nullable: true }),
    message: t.exposeString('message', { nullable: true }),
    at: t.expose('at', { type: 'DateTime' }),
  }),
});
