import { builder } from './builder.ts';
import { AttemptStateEnum } from './enums.ts';

builder.objectType('Attempt', {
  description: 'One try at a job, on one provider. Retries and fallbacks are attempts, never new jobs.',
  fields: (t) => ({
    id: t.exposeID('id'),
    jobId: t.exposeID('jobId'),
    number: t.exposeInt('number', { description: '1, 2, 3 … within its job' }),
    provider: t.exposeString('provider'),
    state: t.expose('state', { type: AttemptStateEnum }),
    readVersion: t.exposeInt('readVersion', { description: "The job's version when this attempt started" }),
    error: t.exposeString('error', { nullable: true }),
    startedAt: t.expose('startedAt', { type: 'DateTime' }),
    deadlineAt: t.expose('deadlineAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
  }),
});
