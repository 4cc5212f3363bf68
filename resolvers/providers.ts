import { latestCertifications } from '../db/certifications.ts';
import { OPERATIONS } from '../providers/operations/index.ts';
import { builder } from '../schema/builder.ts';
import { ProviderRef, type ProviderShape } from '../schema/provider.ts';

builder.queryField('providers', (t) =>
  t.field({
    type: [ProviderRef],
    description: 'The configured providers and their contract certifications',
    resolve: async (_, __, { core }) => {
      const latest = await latestCertifications(core.pool);
      return Promise.all(
        core.providers.names().map(async (name): Promise<ProviderShape> => {
          const config = core.providers.get(name)!;
          const model = config.kind === 'manual' ? null : core.providers.model(name);
          const certifications = latest
            .filter((c) => c.provider === name)
            .map((c) => {
              const terms = core.providers.certificationTerms(name, c.operation);
              const current =
                !!terms && c.model === terms.model && c.templateVersion === terms.templateVersion && c.outputSchemaHash === terms.outputSchemaHash;
              return { ...c, current };
            });
          const certifiedOperations: string[] = [];
          for (const op of OPERATIONS.keys()) if (await core.providers.isCertified(core.pool, name, op)) certifiedOperations.push(op);
          return { name, kind: config.kind, model, timeoutMs: config.timeoutMs, certifications, certifiedOperations };
        }),
      );
    },
  }),
);
