import type { UsageEntry } from '../db/usage.ts';
import { builder } from './builder.ts';

export const UsageEntryRef = builder.objectRef<UsageEntry>('UsageEntry').implement({
  description: 'One debit of the usage ledger: exactly one per SUCCEEDED job.',
  fields: (t) => ({
    jobId: t.exposeID('jobId'),
    effectKey: t.exposeString('effectKey', { description: 'job:{jobId}:charge' }),
    units: t.exposeInt('units', { description: "The provider's reported token count, or 1 where it reports none" }),
    at: t.expose('at', { type: 'DateTime' }),
  }),
});
