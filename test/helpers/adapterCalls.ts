// Building adapter calls the way the runner does (the operation's own prompt and output schema, a real
// AbortSignal that fires at the deadline), and small waits that end on a condition, never a fixed sleep.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CallOutcome, CallRequest, ProviderAdapter } from '../../providers/adapters/types.ts';
import { OPERATIONS } from '../../providers/operations/index.ts';
import { parseClassifyPrompt, type Responder } from '../fakes/respond.ts';
import { defaultRespond } from '../fakes/respond.ts';

export const SUMMARIZE_INPUT = { text: 'The quick brown fox jumps over the lazy dog. Then it runs far away into the dark forest and is never seen again.' };
export const CLASSIFY_INPUT = { text: 'I walked my dogs in the park today.', labels: ['cats', 'dogs', 'birds'] };

export interface PreparedCall {
  request: CallRequest;
  /** Every providerRequestId onAccepted was called with, in order. */
  accepted: (string | undefined)[];
  controller: AbortController;
  /** Stops the deadline timer. */
  dispose(): void;
}

/**
 * A CallRequest for `operation` on its sample input, as the runner builds it: the signal aborts at the
 * deadline, `deadlineMs` from now.
 */
export function prepareCall(opts: { attemptId: string; operation?: 'summarize' | 'classify'; deadlineMs?: number; input?: unknown }): PreparedCall {
  const operation = OPERATIONS.get(opts.operation ?? 'summarize')!;
  const input = opts.input ?? (operation.name === 'classify' ? CLASSIFY_INPUT : SUMMARIZE_INPUT);
  const deadlineMs = opts.deadlineMs ?? 30_000;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort('deadline'), deadlineMs);
  const accepted: (string | undefined)[] = [];
  const request: CallRequest = {
    attemptId: opts.attemptId,
    operation: operation.name,
    input,
    prompt: operation.prompt.render(input),
    outputSchema: operation.outputJsonSchema(),
    maxOutputTokens: operation.prompt.maxOutputTokens,
    signal: controller.signal,
    deadline: new Date(Date.now() + deadlineMs),
    onAccepted: async (id) => {
      accepted.push(id);
    },
  };
  return { request, accepted, controller, dispose: () => clearTimeout(timer) };
}

/** Calls, then (background mode) asks again until the outcome is no longer pending. */
export async function callToEnd(adapter: ProviderAdapter, request: CallRequest, maxRetrieves = 50): Promise<CallOutcome> {
  let outcome = await adapter.call(request);
  for (let i = 0; outcome.kind === 'pending' && adapter.retrieve && i < maxRetrieves; i++) {
    outcome = await adapter.retrieve({ attemptId: request.attemptId, providerRequestId: outcome.providerRequestId }, request.signal);
  }
  return outcome;
}

/** A local port nothing listens on (bound, then closed): connecting to it is refused. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * The fakes' default model, but reading classify's labels from onejob's current prompt
 * ("Labels (n):\n[...]"), which the fakes' parseClassifyPrompt ("Labels: [...]") does not recognise.
 */
export const onejobRespond: Responder = (ctx) => {
  if (ctx.operation !== 'classify') return defaultRespond(ctx);
  const match = /^Labels(?: \(\d+\))?:\s*\n?(\[.*\])$/m.exec(ctx.user);
  const labels = match ? (JSON.parse(match[1]!) as string[]) : (parseClassifyPrompt(ctx.user)?.labels ?? []);
  const at = ctx.user.indexOf('<text>');
  const text = (at >= 0 ? ctx.user.slice(at) : ctx.user).toLowerCase();
  const label = labels.find((l) => text.includes(l.toLowerCase())) ?? labels[0] ?? '';
  return { label, confidence: 0.9 };
};

/** Polls `probe` until it answers something truthy; fails after `timeoutMs` naming `what`. */
export async function eventually<T>(probe: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
