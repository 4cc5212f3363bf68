import type { Certification } from '../db/certifications.ts';
import { builder } from './builder.ts';

export interface ProviderShape {
  name: string;
  kind: string;
  model: string | null;
  timeoutMs: number;
  certifications: (Certification & { current: boolean })[];
  certifiedOperations: string[];
}

const CertificationFailure = builder.objectRef<{ fixture: string; reason: string }>('CertificationFailure').implement({
  fields: (t) => ({ fixture: t.exposeString('fixture'), reason: t.exposeString('reason') }),
});

export const CertificationRef = builder.objectRef<Certification & { current: boolean }>('Certification').implement({
  description: 'One run of an operation’s fixtures through a provider (`onejob contract run`).',
  fields: (t) => ({
    operation: t.exposeString('operation'),
    model: t.exposeString('model'),
    templateVersion: t.exposeString('templateVersion'),
    outputSchemaHash: t.exposeString('outputSchemaHash'),
    passed: t.exposeBoolean('passed'),
    current: t.exposeBoolean('current', {
      description: 'Earned with the provider’s current model, the operation’s current prompt version and output schema',
    }),
    fixtures: t.exposeInt('fixtures'),
    failures: t.field({ type: [CertificationFailure], resolve: (c) => c.failures }),
    promptTokens: t.exposeInt('promptTokens', { description: 'Prompt tokens of all fixtures, by the provider’s tokenizer' }),
    certifiedAt: t.expose('certifiedAt', { type: 'DateTime' }),
  }),
});

export const ProviderRef = builder.objectRef<ProviderShape>('Provider').implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    kind: t.exposeString('kind', { description: 'manual, openai, anthropic or sim' }),
    model: t.exposeString('model', { nullable: true }),
    timeoutMs: t.exposeInt('timeoutMs'),
    certifiedOperations: t.exposeStringList('certifiedOperations', {
      description: 'Operations this provider may take over automatically (manual providers: all)',
    }),
    certifications: t.field({
      type: [CertificationRef],
      description: 'The newest certification per operation',
      resolve: (p) => p.certifications,
    }),
  }),
});
