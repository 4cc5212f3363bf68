import { z } from 'zod';
import { visibleOwner } from '../core/caller.ts';
import { idempotencyKeyProblem } from '../core/createJob.ts';
import { badInput } from '../core/errors.ts';
import { findJob, findJobByKey, listJobs } from '../db/jobs.ts';
import { builder } from '../schema/builder.ts';
import { JobStatusEnum } from '../schema/enums.ts';
import { JobConnection } from '../schema/job.ts';

const UUID = z.uuid({ message: 'must be a job id (a UUID)' });
export const MAX_PAGE_SIZE = 100;

/** Opaque cursor: the (createdAt, id) the next page starts after. */
function encodeCursor(createdAt: Date, id: string): string {
  return Buffer.from(`${createdAt.toISOString()}|${id}`).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  const [at, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(at ?? '');
  if (!id || Number.isNaN(createdAt.getTime()) || !UUID.safeParse(id).success) {
    throw badInput('after', 'is not a cursor this API gave out');
  }
  return { createdAt, id };
}

builder.queryType({
  fields: (t) => ({
    job: t.field({
      type: 'Job',
      nullable: true,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_, { id }, { core, caller }) =>
        UUID.safeParse(id).success ? ((await findJob(core.pool, String(id), visibleOwner(caller))) ?? null) : null,
    }),
    jobByKey: t.field({
      type: 'Job',
      nullable: true,
      description: "The caller's job for this key: the one holding it, else the newest that used it",
      args: { idempotencyKey: t.arg.string({ required: true }) },
      // A key createJob would refuse is held by no job (and one with U+0000 cannot even be sent to the database).
      resolve: async (_, { idempotencyKey }, { core, caller }) =>
        idempotencyKeyProblem(idempotencyKey) ? null : ((await findJobByKey(core.pool, caller.ownerId, idempotencyKey)) ?? null),
    }),
    jobs: t.field({
      type: JobConnection,
      description: 'Newest first. Operators see every owner’s jobs.',
      args: {
        first: t.arg.int({ validate: z.number().int().min(1).max(MAX_PAGE_SIZE) }),
        after: t.arg.string(),
        status: t.arg({ type: JobStatusEnum }),
      },
      resolve: async (_, args, { core, caller }) => {
        const first = args.first ?? 20;
        const rows = await listJobs(core.pool, {
          ownerId: visibleOwner(caller),
          status: args.status ?? undefined,
          first,
          after: args.after ? decodeCursor(args.after) : undefined,
        });
        const page = rows.slice(0, first);
        const edges = page.map((node) => ({ cursor: encodeCursor(node.createdAt, node.id), node }));
        return { edges, pageInfo: { hasNextPage: rows.length > first, endCursor: edges.at(-1)?.cursor ?? null } };
      },
    }),
  }),
});
