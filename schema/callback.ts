import { builder } from './builder.ts';

export interface CallbackShape {
  url: string;
  /** Only in setCallback's answer; null everywhere else. */
  secret: string | null;
  updatedAt: Date;
}

export const CallbackRef = builder.objectRef<CallbackShape>('Callback').implement({
  description: 'Where onejob POSTs Standard Webhooks notifications when one of your jobs SUCCEEDED, FAILED or was CANCELLED.',
  fields: (t) => ({
    url: t.exposeString('url'),
    secret: t.exposeString('secret', {
      nullable: true,
      description: 'The `whsec_…` signing secret: answered once, by setCallback; null when read back. Keep it to verify webhook-signature.',
    }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'When setCallback last set it' }),
  }),
});
