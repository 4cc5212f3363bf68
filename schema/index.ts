// The whole GraphQL schema: types from schema/, root fields from resolvers/.
import { builder } from './builder.ts';
import './scalars.ts';
import './enums.ts';
import './attempt.ts';
import './job.ts';
import './event.ts';
import './provider.ts';
import './callback.ts';
import './usageEntry.ts';
import './usage.ts';
import '../resolvers/query.ts';
import '../resolvers/mutation.ts';
import '../resolvers/subscription.ts';
import '../resolvers/providers.ts';
import '../resolvers/effects.ts';

export const schema = builder.toSchema({ sortSchema: false });
