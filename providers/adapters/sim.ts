// Kind `sim`: a local simulated model for the demo and tests. Its behaviour comes from its config:
// answer well, never answer (a timeout), or answer in one of the ways real models break contracts.
// It remembers what it did with each request, so the reconciler can ask it, as it would a real
// provider with a retrieve endpoint: a request it let time out was, it says, never processed.
import type { Config } from '../../config.ts';
import { sleep } from './http.ts';
import type { CallOutcome, ProviderAdapter } from './types.ts';

type SimConfig = Extract<Config['providers'][string], { kind: 'sim' }>;

/** What a well-behaved model would answer for onejob's operations. */
export function simulatedOutput(operation: string, input: unknown): Record<string, unknown> {
  const i = input as { text?: string; labels?: string[] };
  const text = i.text ?? '';
  if (operation === 'classify') {
    const labels = i.labels ?? [];
    const hit = labels.find((l) => text.toLowerCase().includes(l.toLowerCase()));
    return { label: hit ?? labels[0] ?? '', confidence: hit ? 0.9 : 0.55 };
  }
  const sentences = text.split(/(?<=[.!?])\s+/).map((s) => s.trim()).filter(Boolean);
  const chars = [...text];
  const summary = (sentences[0] && [...sentences[0]].length < chars.length ? sentences[0] : chars.slice(0, Math.max(1, Math.floor(chars.length / 2))).join(''))
    .slice(0, 2000);
  const keyPoints = (sentences.length ? sentences : [text]).slice(0, 3).map((s) => [...s].slice(0, 300).join(''));
  return { summary, keyPoints };
}

export function simAdapter(config: SimConfig): ProviderAdapter {
  const fate = new Map<string, CallOutcome>();
  const remember = (id: string, outcome: CallOutcome) => {
    if (fate.size > 10_000) fate.clear();
    fate.set(id, outcome);
    return outcome;
  };
  return {
    async call(req) {
      const requestId = `sim_${req.attemptId}`;
      await req.onAccepted(requestId);
      if (config.behaviour === 'timeout') {
        remember(req.attemptId, { kind: 'failed', reason: 'the simulated provider dropped the request: never processed', providerRequestId: requestId });
        await sleep(365 * 24 * 3600 * 1000, req.signal); // until the deadline aborts it
        return { kind: 'unknown', reason: 'no answer before the deadline', providerRequestId: requestId };
      }
      if (!(await sleep(config.latencyMs, req.signal))) return { kind: 'unknown', reason: 'no answer before the deadline', providerRequestId: requestId };
      const good = simulatedOutput(req.operation, req.input);
      const outcome: CallOutcome = (() => {
        switch (config.behaviour) {
          case 'hallucinated_key':
            return { kind: 'result', output: { ...good, explanation: 'I added this key on my own.' }, usageTokens: 42, providerRequestId: requestId };
          case 'broken_json':
            return { kind: 'failed', reason: 'malformed JSON from the provider (Unexpected end of JSON input): "{\\"summary\\": \\"half"', providerRequestId: requestId };
          case 'wrong_label':
            return {
              kind: 'result',
              output: req.operation === 'classify' ? { label: 'none of the above', confidence: 0.99 } : { ...good, summary: `${(req.input as { text: string }).text} (expanded)` },
              usageTokens: 42,
              providerRequestId: requestId,
            };
          case 'refuse':
            return { kind: 'failed', reason: 'the model refused', providerRequestId: requestId };
          case 'fail':
            return { kind: 'failed', reason: 'HTTP 400: simulated provider error', providerRequestId: requestId };
          default:
            return { kind: 'result', output: good, usageTokens: 42, providerRequestId: requestId };
        }
      })();
      return remember(req.attemptId, outcome);
    },
    async retrieve({ attemptId }) {
      return fate.get(attemptId) ?? { kind: 'failed', reason: 'the simulated provider has no record of this request: never processed' };
    },
  };
}
