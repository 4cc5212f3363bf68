// The inbound message log that `onejob replay` plays against a running service: one JSON object per
// line, each a message as a client, an operator or a provider sent it. Attempts are named by their
// job's (owner, idempotency key) and their number, not by id: ids are minted by the service, so a log
// recorded on one database can be replayed into another.
import { z } from 'zod';

const attemptRef = {
  owner: z.string().min(1),
  idempotencyKey: z.string().min(1),
  attemptNumber: z.number().int().min(1),
};

export const LogMessage = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('createJob'),
    owner: z.string().min(1),
    input: z.strictObject({
      idempotencyKey: z.string(),
      operation: z.string(),
      provider: z.string(),
      fallbackProviders: z.array(z.string()).optional(),
      input: z.unknown(),
      attemptTimeoutMs: z.number().int().optional(),
    }),
  }),
  z.strictObject({
    type: z.literal('reportAttemptResult'),
    operator: z.string().min(1),
    ...attemptRef,
    result: z.unknown().optional(),
    error: z.string().optional(),
  }),
  z.strictObject({ type: z.literal('cancelAttempt'), operator: z.string().min(1), ...attemptRef, reason: z.string().min(1) }),
  z.strictObject({ type: z.literal('cancelJob'), owner: z.string().min(1), idempotencyKey: z.string().min(1) }),
  z.strictObject({
    type: z.literal('webhook'),
    provider: z.string().min(1),
    ...attemptRef,
    requestId: z.string().min(1),
    status: z.enum(['succeeded', 'failed']),
    result: z.unknown().optional(),
    error: z.string().optional(),
  }),
]);
export type LogMessage = z.infer<typeof LogMessage>;

export function parseLog(text: string): LogMessage[] {
  return text
    .split('\n')
    .map((line, i) => [line.trim(), i + 1] as const)
    .filter(([line]) => line !== '')
    .map(([line, n]) => {
      const parsed = LogMessage.safeParse(JSON.parse(line));
      if (!parsed.success) throw new Error(`line ${n}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
      return parsed.data;
    });
}
