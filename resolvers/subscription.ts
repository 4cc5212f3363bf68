import { z } from 'zod';
import { visibleOwner } from '../core/caller.ts';
import { notFound } from '../core/errors.ts';
import { findJob } from '../db/jobs.ts';
import type { JobEvent } from '../db/rows.ts';
import { builder } from '../schema/builder.ts';

const UUID = z.uuid();

builder.subscriptionType({
  fields: (t) => ({
    jobEvents: t.field({
      type: 'JobEvent',
      description: 'Every stored event with seq > afterSeq in order, then live ones: no gap, no duplicate, on any instance',
      args: {
        jobId: t.arg.id({ required: true }),
        afterSeq: t.arg.int({ defaultValue: 0, validate: z.number().int().min(0) }),
      },
      subscribe: async (_, { jobId, afterSeq }, { core, caller, hub }) => {
        const id = String(jobId);
        if (!UUID.safeParse(id).success || !(await findJob(core.pool, id, visibleOwner(caller)))) throw notFound('job', id);
        return hub.subscribe(id, afterSeq ?? 0);
      },
      resolve: (event: JobEvent) => event,
    }),
  }),
});
