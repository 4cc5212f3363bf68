import { builder } from './builder.ts';
import { JobStatusEnum } from './enums.ts';

builder.objectType('Job', {
  description: 'One user intent, keyed by (owner, idempotencyKey). Exactly one attempt’s result is kept.',
  fields: (t) => ({
    id: t.exposeID('id'),
    idempotencyKey: t.exposeString('idempotencyKey'),
    operation: t.exposeString('operation'),
    provider: t.exposeString('provider', { description: 'The primary provider' }),
    fallbackProviders: t.exposeStringList('fallbackProviders'),
    input: t.expose('input', { type: 'JSON' }),
    status: t.expose('status', { type: JobStatusEnum }),
    version: t.exposeInt('version', { description: 'Starts at 1; moves only when a result wins or the job is cancelled' }),
    result: t.expose('result', { type: 'JSON', nullable: true, description: "The winning attempt's result" }),
    completedBy: t.field({
      type: 'Attempt',
      nullable: true,
      description: 'The winning attempt',
      resolve: (job) => job.attempts.find((a) => a.id === job.completedBy) ?? null,
    }),
    attempts: t.field({ type: ['Attempt'], description: 'Ordered by number', resolve: (job) => job.attempts }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    keyExpiresAt: t.expose('keyExpiresAt', {
      type: 'DateTime',
      description: 'After this the same idempotency key starts a new job; this one stays readable by id',
    }),
  }),
});

export const PageInfo = builder.objectRef<{ hasNextPage: boolean; endCursor: string | null }>('PageInfo').implement({
  fields: (t) => ({
    hasNextPage: t.exposeBoolean('hasNextPage'),
    endCursor: t.exposeString('endCursor', { nullable: true }),
  }),
});

export interface JobEdgeShape {
  cursor: string;
  node: import('../db/rows.ts').JobView;
}

export const JobEdge = builder.objectRef<JobEdgeShape>('JobEdge').implement({
  fields: (t) => ({
    cursor: t.exposeString('cursor'),
    node: t.field({ type: 'Job', resolve: (e) => e.node }),
  }),
});

export const JobConnection = builder
  .objectRef<{ edges: JobEdgeShape[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } }>('JobConnection')
  .implement({
    fields: (t) => ({
      edges: t.field({ type: [JobEdge], resolve: (c) => c.edges }),
      nodes: t.field({ type: ['Job'], resolve: (c) => c.edges.map((e) => e.node) }),
      pageInfo: t.field({ type: PageInfo, resolve: (c) => c.pageInfo }),
    }),
  });
