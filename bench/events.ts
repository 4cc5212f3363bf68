// Figure 3: event latency from a commit on instance A to a subscriber on instance B. N graphql-ws
// subscriptions on B watch one job; A runs a bounded series of operator/owner mutations on that job,
// one at a time, each waiting until every subscriber has its events. Latency is measured per event
// per subscriber from the moment A's mutation response arrived (the transaction had committed) to the
// moment the subscriber's `next` callback ran in this process; both on this process's clock.
import http from 'node:http';
import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { JOB_EVENTS_CHANNEL } from '../core/eventHub.ts';
import type { Pool } from '../db/pool.ts';
import { dataOf, GraphQLHttpClient } from './http.ts';
import type { RunningInstance } from './instances.ts';
import { CANCEL_ATTEMPT, CREATE_JOB, GOOD_SUMMARY, JOB_EVENTS, REPORT, RETRY_JOB, summarizeInput } from './queries.ts';
import { cpuWindow, summarize, type Summary } from './stats.ts';

export interface EventsOptions {
  subscribers: number;
  subscriptionsPerSocket: number;
  mutations: number;
  perMutationTimeoutMs: number;
  connectTimeoutMs: number;
}

export interface EventsResult {
  subscribers: number;
  sockets: number;
  connectMs: number;
  subscribersOnB: number;
  mutations: { kind: string; events: number }[];
  storedBeforeSubscribing: number;
  finalSeq: number;
  delivered: number;
  expected: number;
  gaps: number;
  duplicates: number;
  outOfOrder: number;
  subscriptionErrors: number;
  firstSubscriptionError?: string;
  timedOutMutations: number;
  /** From A's mutation response to receipt on B, per event per subscriber. */
  fromResponse: Summary;
  /** From sending A's mutation to receipt on B (an upper bound: includes the mutation's own time). */
  fromSend: Summary;
  /** Per event: from A's response until the last of the N subscribers had it. */
  fanOutComplete: Summary;
  mutationLatency: Summary;
  negativeFromResponse: number;
  /** Per mutation: from A's response to its NOTIFY reaching a plain LISTEN connection in this process. */
  notifyFromResponse: Summary;
  notifiesMissing: number;
  /** CPU seconds during the mutation series: instance A, instance B, and this process (the 1,000 clients). */
  cpu: { aS: number; bS: number; benchS: number; wallS: number; machineS?: number };
}

interface Sub {
  seqs: number[];
  at: number[];
  lastSeq: number;
  error?: string;
}

const CONNECT_BATCH = 100;

async function withTimeout(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

export async function runEvents(
  a: RunningInstance,
  b: RunningInstance,
  owner: string,
  operator: string,
  pool: Pool,
  databaseUrl: string,
  opts: EventsOptions,
  progress: (line: string) => void,
): Promise<EventsResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  const asOwner = new GraphQLHttpClient(a.graphqlUrl, owner, agent);
  const asOperator = new GraphQLHttpClient(a.graphqlUrl, operator, agent);
  const created = dataOf(
    await asOwner.post(CREATE_JOB, { input: summarizeInput(`events-${process.pid}-${Date.now()}`, { fallbackProviders: [] }) }),
    'createJob',
  ).createJob;
  const jobId: string = created.job.id;
  let liveAttempt: string = created.job.attempts[0].id;
  const maxSeq = async () =>
    (await pool.query<{ n: number }>('SELECT coalesce(max(seq), 0)::int AS n FROM job_events WHERE job_id = $1', [jobId])).rows[0]!.n;
  const storedBeforeSubscribing = await maxSeq();

  // A third listener, apart from the instances: when does the commit's NOTIFY reach a plain LISTEN?
  const notifiedAt = new Map<number, number>();
  const listener = new pg.Client({ connectionString: databaseUrl, application_name: 'onejob-bench-listener' });
  listener.on('notification', (msg) => {
    const at = performance.now();
    const [job, seq] = (msg.payload ?? '').split(':');
    if (job === jobId && !notifiedAt.has(Number(seq))) notifiedAt.set(Number(seq), at);
  });
  listener.on('error', () => {});

  const sockets = Math.ceil(opts.subscribers / opts.subscriptionsPerSocket);
  const clients: Client[] = [];
  const subs: Sub[] = [];
  const unsubscribes: (() => void)[] = [];
  let waiter: { seq: number; resolve(): void } | undefined;
  let behind = 0; // subscribers whose lastSeq is below waiter.seq
  const checkWaiter = () => {
    if (waiter && behind === 0) {
      const w = waiter;
      waiter = undefined;
      w.resolve();
    }
  };
  const waitAll = (seq: number, timeoutMs: number) =>
    new Promise<boolean>((resolve) => {
      behind = subs.filter((s) => !s.error && s.lastSeq < seq).length;
      const timer = setTimeout(() => {
        waiter = undefined;
        resolve(false);
      }, timeoutMs);
      waiter = {
        seq,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      checkWaiter();
    });

  let firstSubscriptionError: string | undefined;
  try {
    await listener.connect();
    await listener.query(`LISTEN ${JOB_EVENTS_CHANNEL}`);
    const t0 = performance.now();
    for (let i = 0; i < sockets; i++) {
      clients.push(
        createClient({
          url: b.graphqlUrl.replace(/^http/, 'ws'),
          webSocketImpl: WebSocket,
          connectionParams: { authorization: `Bearer ${owner}` },
          retryAttempts: 0,
          lazy: true,
        }),
      );
    }
    // Subscribe in batches: each waits for the stored events (the replay that proves it is registered).
    for (let i = 0; i < opts.subscribers; i += CONNECT_BATCH) {
      const batch: Promise<void>[] = [];
      for (let j = i; j < Math.min(opts.subscribers, i + CONNECT_BATCH); j++) {
        const sub: Sub = { seqs: [], at: [], lastSeq: 0 };
        subs.push(sub);
        batch.push(
          new Promise<void>((resolve) => {
            const client = clients[Math.floor(j / opts.subscriptionsPerSocket)]!;
            unsubscribes.push(
              client.subscribe<{ jobEvents: { seq: number } }>(
                { query: JOB_EVENTS, variables: { jobId, afterSeq: 0 } },
                {
                  next: (msg) => {
                    const now = performance.now();
                    const seq = msg.data?.jobEvents.seq;
                    if (seq === undefined) {
                      sub.error ??= JSON.stringify(msg.errors);
                      firstSubscriptionError ??= sub.error;
                      return;
                    }
                    sub.seqs.push(seq);
                    sub.at.push(now);
                    if (seq > sub.lastSeq) {
                      const wasBehind = waiter !== undefined && sub.lastSeq < waiter.seq;
                      sub.lastSeq = seq;
                      if (wasBehind && seq >= waiter!.seq) {
                        behind--;
                        checkWaiter();
                      }
                    }
                    if (seq >= storedBeforeSubscribing) resolve();
                  },
                  error: (err) => {
                    const close = err as { code?: number; reason?: string };
                    const text =
                      err instanceof Error ? err.message : close.code ? `socket closed ${close.code} ${close.reason ?? ''}` : String(err);
                    firstSubscriptionError ??= text;
                    if (!sub.error && waiter && sub.lastSeq < waiter.seq) {
                      behind--;
                      sub.error = text;
                      checkWaiter();
                    }
                    sub.error ??= text;
                    resolve();
                  },
                  complete: () => resolve(),
                },
              ),
            );
          }),
        );
      }
      await withTimeout(Promise.all(batch), opts.connectTimeoutMs);
    }
    const allReady = await waitAll(storedBeforeSubscribing, opts.connectTimeoutMs);
    const connectMs = performance.now() - t0;
    const subscribersOnB = (await b.stats()).subscribers;
    progress(
      `${opts.subscribers} subscriptions on B over ${sockets} socket(s) in ${Math.round(connectMs)} ms` +
        (allReady ? '' : ' (some did not get the stored events in time)'),
    );

    // The series on A: cancelAttempt (operator), retryJob (owner), reportAttemptResult with an error
    // (operator; no fallback left, so the job turns FAILED), retryJob; ...; and finally a winning result.
    const mutations: { kind: string; events: number; seq: number; answered: number }[] = [];
    const seqOrigin = new Map<number, { sent: number; answered: number }>();
    const mutationLatencies: number[] = [];
    let timedOutMutations = 0;
    let lastSeq = storedBeforeSubscribing;
    const [a0, b0] = await Promise.all([a.stats(), b.stats()]);
    const cpu = cpuWindow();
    const kinds = ['cancelAttempt', 'retryJob', 'reportAttemptResult(error)', 'retryJob'] as const;
    for (let i = 0; i < opts.mutations; i++) {
      const last = i === opts.mutations - 1;
      const kind = last ? 'reportAttemptResult(result)' : kinds[i % kinds.length]!;
      const sent = performance.now();
      let reply;
      switch (kind) {
        case 'cancelAttempt':
          reply = await asOperator.post(CANCEL_ATTEMPT, { attemptId: liveAttempt, reason: 'bench' });
          break;
        case 'retryJob':
          reply = await asOwner.post(RETRY_JOB, { jobId });
          break;
        case 'reportAttemptResult(error)':
          reply = await asOperator.post(REPORT, { attemptId: liveAttempt, error: 'bench: provider said no' });
          break;
        default:
          reply = await asOperator.post(REPORT, { attemptId: liveAttempt, result: GOOD_SUMMARY });
      }
      const answered = performance.now();
      const data = dataOf(reply, kind);
      if (kind === 'retryJob') liveAttempt = data.retryJob.id;
      mutationLatencies.push(answered - sent);
      const seq = await maxSeq();
      for (let s = lastSeq + 1; s <= seq; s++) seqOrigin.set(s, { sent, answered });
      mutations.push({ kind, events: seq - lastSeq, seq, answered });
      lastSeq = seq;
      if (!(await waitAll(seq, opts.perMutationTimeoutMs)) && ++timedOutMutations >= 3) {
        progress('three mutations timed out waiting for their events: stopping the series early');
        break;
      }
    }
    const c = cpu.end();
    const [a1, b1] = await Promise.all([a.stats(), b.stats()]);
    // Anything late (a duplicate, a straggler) has a moment to show up before the count.
    await new Promise((r) => setTimeout(r, 500));

    const fromResponse: number[] = [];
    const fromSend: number[] = [];
    const lastReceipt = new Map<number, number>();
    let delivered = 0;
    let gaps = 0;
    let duplicates = 0;
    let outOfOrder = 0;
    for (const sub of subs) {
      delivered += sub.seqs.length;
      const seen = new Set<number>();
      let prev = 0;
      sub.seqs.forEach((seq, k) => {
        if (seen.has(seq)) duplicates++;
        else seen.add(seq);
        if (seq < prev) outOfOrder++;
        prev = Math.max(prev, seq);
        const origin = seqOrigin.get(seq);
        if (origin) {
          const at = sub.at[k]!;
          fromResponse.push(at - origin.answered);
          fromSend.push(at - origin.sent);
          lastReceipt.set(seq, Math.max(lastReceipt.get(seq) ?? 0, at));
        }
      });
      for (let s = 1; s <= lastSeq; s++) if (!seen.has(s)) gaps++;
    }
    const notifyLatencies = mutations.filter((m) => notifiedAt.has(m.seq)).map((m) => notifiedAt.get(m.seq)! - m.answered);
    const fanOut = [...lastReceipt.entries()].map(([seq, at]) => at - seqOrigin.get(seq)!.answered);
    return {
      subscribers: opts.subscribers,
      sockets,
      connectMs,
      subscribersOnB,
      mutations,
      storedBeforeSubscribing,
      finalSeq: lastSeq,
      delivered,
      expected: opts.subscribers * lastSeq,
      gaps,
      duplicates,
      outOfOrder,
      subscriptionErrors: subs.filter((s) => s.error).length,
      firstSubscriptionError,
      timedOutMutations,
      fromResponse: summarize(fromResponse),
      fromSend: summarize(fromSend),
      fanOutComplete: summarize(fanOut),
      mutationLatency: summarize(mutationLatencies),
      negativeFromResponse: fromResponse.filter((v) => v < 0).length,
      notifyFromResponse: summarize(notifyLatencies),
      notifiesMissing: mutations.length - notifyLatencies.length,
      cpu: { aS: (a1.cpuUs - a0.cpuUs) / 1e6, bS: (b1.cpuUs - b0.cpuUs) / 1e6, benchS: c.selfCpuS, wallS: c.wallS, machineS: c.machineCpuS },
    };
  } finally {
    for (const u of unsubscribes) u();
    await Promise.all(clients.map((c) => c.dispose()));
    agent.destroy();
    await listener.end().catch(() => {});
  }
}
