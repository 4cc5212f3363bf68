import type { CallOutcome } from './types.ts';

/** Parses a model's JSON text; broken JSON is a definitive failure that names what broke. */
export function parseJsonOutput(text: string, extra: { usageTokens?: number; providerRequestId?: string } = {}): CallOutcome {
  try {
    return { kind: 'result', output: JSON.parse(text), ...extra };
  } catch (err) {
    return {
      kind: 'failed',
      reason: `malformed JSON from the provider (${(err as Error).message}): ${JSON.stringify(text.slice(0, 120))}`,
      providerRequestId: extra.providerRequestId,
    };
  }
}
