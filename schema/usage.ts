import type { Usage } from '../db/usage.ts';
import { builder } from './builder.ts';
import { UsageEntryRef } from './usageEntry.ts';

export const UsageRef = builder.objectRef<Usage>('Usage').implement({
  description: "Your usage ledger: what your SUCCEEDED jobs were debited.",
  fields: (t) => ({
    total: t.exposeInt('total', { description: 'The sum of every entry’s units, not only of the entries answered' }),
    entries: t.field({ type: [UsageEntryRef], description: 'Newest first', resolve: (u) => u.entries }),
  }),
});
