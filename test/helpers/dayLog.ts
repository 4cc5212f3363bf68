// A day of inbound messages, as onejob's edges would record them: owners creating jobs (and clicking
// twice), operators reporting results and errors (some twice, some late, some breaking the contract),
// operators giving up on attempts, owners cancelling, and a provider delivering results by webhook
// (redelivering some). Jobs interleave; duplicates and late results arrive well after the original.
// Seeded, so a test can regenerate the same day.
import type { LogMessage } from '../../replay/messages.ts';

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const OWNERS = ['acme', 'globex', 'initech', 'umbrella'];
export const DAY_OPERATOR = 'night-shift';
/** Manual providers the day uses; `hooked` delivers by webhook. */
export const DAY_PROVIDERS = ['primary', 'backup', 'hooked'] as const;
const TEXTS = [
  'The quarterly report shows revenue up 12% while costs stayed flat, and the board approved the new plan.',
  'Customer writes that the invoice from March was charged twice and asks for a refund of the second charge.',
  'Release 4.2 fixes the login timeout, adds dark mode and removes the deprecated export endpoint.',
  'The team met on Tuesday, agreed to move the launch to June and asked legal to review the contract.',
];

export function dayLog(options: { seed: number; jobs: number }): LogMessage[] {
  const random = prng(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const streams: LogMessage[][] = [];
  // Duplicates and stragglers of each job, released into the day only once that job's own messages
  // are all out: a straggler can come late, never before the message it repeats.
  const stragglers: LogMessage[][] = [];

  for (let j = 0; j < options.jobs; j++) {
    const owner = pick(OWNERS);
    const key = `order-${options.seed}-${j}`;
    const text = pick(TEXTS);
    const good = { summary: text.split(',')[0]!.slice(0, 60), keyPoints: [text.slice(0, 40)] };
    const viaWebhook = random() < 0.25;
    const provider = viaWebhook ? 'hooked' : 'primary';
    const create: LogMessage = {
      type: 'createJob',
      owner,
      input: { idempotencyKey: key, operation: 'summarize', provider, fallbackProviders: ['backup'], input: { text }, attemptTimeoutMs: 3_600_000 },
    };
    const ref = (attemptNumber: number) => ({ owner, idempotencyKey: key, attemptNumber });
    const report = (attemptNumber: number, outcome: { result?: unknown; error?: string }): LogMessage => ({
      type: 'reportAttemptResult',
      operator: DAY_OPERATOR,
      ...ref(attemptNumber),
      ...outcome,
    });
    const hook = (status: 'succeeded' | 'failed'): LogMessage => ({
      type: 'webhook',
      provider: 'hooked',
      ...ref(1),
      requestId: `req-${key}`,
      status,
      ...(status === 'succeeded' ? { result: good } : { error: 'provider could not finish' }),
    });
    const stream: LogMessage[] = [create];
    const late: LogMessage[] = [];
    if (random() < 0.2) late.push(create); // the double click, arriving later

    const scenario = random();
    if (viaWebhook) {
      const status = random() < 0.8 ? 'succeeded' : 'failed';
      stream.push(hook(status));
      if (status === 'failed') stream.push(report(2, { result: good }));
      late.push(hook(status)); // the provider redelivers (with a new webhook-id)
    } else if (scenario < 0.35) {
      stream.push(report(1, { result: good }));
      if (random() < 0.4) late.push(report(1, { result: good }));
    } else if (scenario < 0.55) {
      stream.push(report(1, { error: 'upstream said 400' }), report(2, { result: good }));
      late.push(report(1, { result: good })); // the primary answers after all: too late
    } else if (scenario < 0.7) {
      stream.push(report(1, { result: { ...good, confidence: 0.9 } }), report(2, { result: good })); // a hallucinated key
    } else if (scenario < 0.82) {
      stream.push({ type: 'cancelAttempt', operator: DAY_OPERATOR, ...ref(1), reason: 'no answer for an hour' });
      if (random() < 0.7) late.push(report(1, { result: good })); // a cancelled attempt's late result may still win
    } else if (scenario < 0.94) {
      stream.push({ type: 'cancelJob', owner, idempotencyKey: key });
      late.push(report(1, { result: good }), { type: 'cancelJob', owner, idempotencyKey: key });
    } else {
      stream.push(report(1, { error: 'upstream said 400' }), report(2, { error: 'fallback said 400 too' }));
    }
    streams.push(stream);
    stragglers.push(late);
  }

  // Interleave the jobs (each job's own messages keep their order), then let the late ones arrive.
  const day: LogMessage[] = [];
  const late: LogMessage[] = [];
  const cursors = streams.map(() => 0);
  let open = streams.length;
  while (open > 0) {
    const i = Math.floor(random() * streams.length);
    if (cursors[i]! >= streams[i]!.length) continue;
    day.push(streams[i]![cursors[i]!]!);
    cursors[i]!++;
    if (cursors[i] === streams[i]!.length) {
      open--;
      late.push(...stragglers[i]!);
    }
    if (late.length && random() < 0.15) day.push(late.splice(Math.floor(random() * late.length), 1)[0]!);
  }
  return [...day, ...late];
}
