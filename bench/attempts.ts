// Figure 4: what the service adds to one provider call. The same OpenAI adapter call against the same
// local fake OpenAI server, once straight from this process and once as an attempt the service runs:
// createJob on an instance, its attempt runner claims and sends it, and the job's JOB_SUCCEEDED reaches a
// subscriber. Plus the statements the instance sends to Postgres per attempt, counted in its process.
import http from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { Config } from '../config.ts';
import type { Pool } from '../db/pool.ts';
import { openaiAdapter } from '../providers/adapters/openai.ts';
import { OPERATIONS } from '../providers/operations/index.ts';
import { dataOf, GraphQLHttpClient } from './http.ts';
import { startInstance, type RunningInstance } from './instances.ts';
import { startFakeProcess, type FakeProcess } from './openaiFake.ts';
import { CREATE_JOB, JOB_EVENTS, SUMMARY_TEXT, summarizeInput } from './queries.ts';
import type { QueryCounts } from './queryCounter.ts';
import { cpuWindow, summarize, type Summary } from './stats.ts';

export const PROVIDER = 'bench-openai';
export const MODEL = 'gpt-4o-mini';
const API_KEY_ENV = 'BENCH_OPENAI_API_KEY';
/** Generous: no attempt of the bench falls due, however slow the machine. */
export const ATTEMPT_TIMEOUT_MS = 60_000;
const PER_ATTEMPT_TIMEOUT_MS = 30_000;

export interface AttemptsOptions {
  /** Calls (direct) and attempts (service) per series. */
  n: number;
  /** Callers of the concurrent series. */
  concurrency: number;
  /** Calls and attempts before the series, not measured (connections, the tokenizer's first build). */
  warmup: number;
  /** A series stops starting new calls after this, whatever n says. */
  seriesBudgetMs: number;
}

export interface SeriesResult<T> {
  values: T[];
  failed: number;
  firstError?: string;
  wallMs: number;
}

export interface ServiceSample {
  /** createJob sent -> JOB_SUCCEEDED received (ms). */
  total: number;
  /** createJob sent -> its answer. */
  createJob: number;
  /** createJob's answer -> JOB_SUCCEEDED received. */
  afterAnswer: number;
  jobId: string;
  /** Wall-clock (epoch ms, sub-ms) of the send and of the receipt, to line up with the database's timestamps. */
  sentAt: number;
  receivedAt: number;
}

export interface Timeline {
  /** Medians over the attempts of a series, ms, each step from the wall clocks of this process and instance C. */
  steps: { what: string; p50: number; p99: number }[];
  n: number;
}

export interface StatementRow {
  phase: string;
  note: string;
  /** Statements per attempt, per series. */
  perAttempt: number[];
}

export interface SeriesPair {
  concurrency: number;
  direct: SeriesResult<number>;
  service: SeriesResult<ServiceSample>;
  directLatency: Summary;
  serviceTotal: Summary;
  serviceCreateJob: Summary;
  serviceAfterAnswer: Summary;
  /**
   * CPU milliseconds per call or attempt: this process during the direct series (adapter, fetch); instance
   * C and this process (HTTP and WebSocket clients) during the service series; and how many cores the
   * whole machine kept busy meanwhile (undefined where /proc/stat is not readable).
   */
  cpu: { directSelfMs: number; directMachineCores?: number; serviceInstanceMs: number; serviceSelfMs: number; serviceMachineCores?: number };
}

export interface AttemptsResult {
  baseUrl: string;
  series: SeriesPair[];
  timeline: Timeline;
  statements: StatementRow[];
  statementsTotal: number[];
  /** Checkouts (pool.query calls and transactions) per attempt, per series. */
  checkoutsTotal: number[];
  /** Statement sequences none of PHASES recognised, per attempt of each series. */
  unclassified: { text: string; perAttempt: number[] }[];
  /** The database's synchronous_commit: whether each committed write waits for its WAL flush. */
  synchronousCommit: string;
  /** Requests the fake answered, by its answer, over the whole phase (warm-ups included). */
  fakeAnswers: Record<string, number>;
  /** Calls and attempts the phase made (warm-ups included), to compare with fakeAnswers. */
  callsMade: number;
}

/** n operations, `concurrency` at a time, each caller starting its next one when the last ended. */
async function series<T>(n: number, concurrency: number, budgetMs: number, op: (caller: number) => Promise<T>): Promise<SeriesResult<T>> {
  const values: T[] = [];
  let started = 0;
  let failed = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const until = t0 + budgetMs;
  const caller = async (i: number) => {
    while (started < n && performance.now() < until) {
      started++;
      try {
        values.push(await op(i));
      } catch (err) {
        failed++;
        firstError ??= (err as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => caller(i)));
  return { values, failed, firstError, wallMs: performance.now() - t0 };
}

const wallNow = () => performance.timeOrigin + performance.now();

/**
 * What each pooled checkout of instance C was, from its statements. First match wins; `any` is tested
 * against the whole sequence (statements joined by " ; ").
 */
const PHASES: { phase: string; note: string; any: RegExp }[] = [
  { phase: 'createJob', note: 'one statement claims the key and inserts job, attempt and event (the token lookup is cached)', any: /FROM tokens|INSERT INTO idempotency_keys|INSERT INTO jobs/i },
  { phase: 'createJob', note: '', any: /^SELECT \* FROM attempts WHERE job_id = \$1 ORDER BY number$/ },
  { phase: 'claim', note: "the runner's claim (UPDATE … FOR UPDATE SKIP LOCKED) that got the attempt", any: /SET dispatched_by = \$1/ },
  { phase: 'prompt tokens', note: 'UPDATE attempts SET prompt_tokens', any: /SET prompt_tokens = \$2/ },
  { phase: 'mark running', note: "the provider's answer arrived: BEGIN, lock job, STARTING -> RUNNING, ATTEMPT_RUNNING event, COMMIT", any: /SET state = 'RUNNING'/ },
  { phase: 'settle', note: 'settleAttempt: BEGIN, lock the attempt\'s job, read the attempt, CAS on the job, SUCCEEDED, 2 events, usage debit, outbox, COMMIT', any: /^BEGIN ; SELECT j\.\* FROM jobs j\s+WHERE j\.id = \(SELECT job_id FROM attempts WHERE id = \$1\)/ },
  { phase: 'event delivery', note: "this subscriber: the job lookup at subscribe, the hub's reads of job_events (replay, each NOTIFY)", any: /FROM job_events|FROM job_view WHERE id = \$1/ },
  {
    phase: 'background',
    note: "the instance's timers, whatever the load: deadline sweep, callback outbox poll, key expiry, reconciler",
    any: /deadline_at <= \$1|callback_outbox|^DELETE FROM|state = 'UNKNOWN' AND provider = ANY/,
  },
];

function classify(counts: QueryCounts, units: Record<string, number>): { byPhase: Map<string, number>; emptyClaims: number; unclassified: Map<string, number>; checkouts: number; statements: number } {
  const byPhase = new Map<string, number>();
  const unclassified = new Map<string, number>();
  let emptyClaims = 0;
  let checkouts = 0;
  let statements = 0;
  for (const [key, n] of Object.entries(units)) {
    if (n === 0) continue;
    const parts = key.split(',');
    const texts = parts.map((p) => counts.labels[Number.parseInt(p, 10)] ?? '?');
    const joined = texts.join(' ; ');
    checkouts += n;
    statements += n * parts.length;
    const found = PHASES.find((p) => p.any.test(joined));
    if (found?.phase === 'claim' && parts.length === 1 && parts[0]!.endsWith('z')) {
      emptyClaims += n;
      continue;
    }
    if (found) byPhase.set(found.phase, (byPhase.get(found.phase) ?? 0) + n * parts.length);
    else unclassified.set(joined, (unclassified.get(joined) ?? 0) + n * parts.length);
  }
  return { byPhase, emptyClaims, unclassified, checkouts, statements };
}

function delta(before: QueryCounts, after: QueryCounts): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after.units)) {
    const d = v - (before.units[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

export async function runAttempts(
  databaseUrl: string,
  ownerToken: string,
  pool: Pool,
  opts: AttemptsOptions,
  progress: (line: string) => void,
  track: (stoppable: { stop(): Promise<void> }) => void,
): Promise<AttemptsResult> {
  const apiKey = `bench-${randomBytes(12).toString('hex')}`;
  progress('starting the fake OpenAI server');
  const fake: FakeProcess = await startFakeProcess(apiKey);
  track(fake);
  const providerConfig = { kind: 'openai', baseUrl: fake.baseUrl, model: MODEL, apiKeyEnv: API_KEY_ENV, timeoutMs: ATTEMPT_TIMEOUT_MS };
  const config = { providers: { [PROVIDER]: providerConfig } };
  const parsed = Config.parse(config).providers[PROVIDER];
  if (parsed?.kind !== 'openai') throw new Error('the bench provider did not parse as kind openai');
  let callsMade = 0;

  // --- direct: the adapter from this process --------------------------------------------------------
  const adapter = openaiAdapter(parsed, { [API_KEY_ENV]: apiKey });
  const operation = OPERATIONS.get('summarize')!;
  const input = { text: SUMMARY_TEXT };
  const prompt = operation.prompt.render(input);
  const outputSchema = operation.outputJsonSchema();
  const direct = async (): Promise<number> => {
    callsMade++;
    const controller = new AbortController();
    const t0 = performance.now();
    const outcome = await adapter.call({
      attemptId: randomUUID(),
      operation: operation.name,
      input,
      prompt,
      outputSchema,
      maxOutputTokens: operation.prompt.maxOutputTokens,
      signal: controller.signal,
      deadline: new Date(Date.now() + ATTEMPT_TIMEOUT_MS),
      onAccepted: async () => {},
    });
    const elapsed = performance.now() - t0;
    if (outcome.kind !== 'result') throw new Error(`the adapter answered ${outcome.kind}: ${'reason' in outcome ? outcome.reason : ''}`);
    return elapsed;
  };

  // --- service: instance C, with that provider only, counting its statements ----------------------------
  progress('starting instance C (provider bench-openai, statement counting on)');
  const c: RunningInstance = await startInstance(databaseUrl, 'C', { config, countQueries: true, env: { [API_KEY_ENV]: apiKey } });
  track(c);
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.concurrency });
  const client = new GraphQLHttpClient(c.graphqlUrl, ownerToken, agent);
  let socketError: string | undefined;
  const sockets: Client[] = Array.from({ length: opts.concurrency }, () =>
    createClient({
      url: c.graphqlUrl.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${ownerToken}` },
      retryAttempts: 0,
      // Open now and kept open: a lazy client would close and reopen (and re-authenticate) per subscription.
      lazy: false,
      onNonLazyError: (err) => {
        socketError ??= err instanceof Error ? err.message : String((err as { reason?: string })?.reason ?? err);
      },
    }),
  );
  const keyPrefix = `attempts-${process.pid}-${Date.now()}`;
  let keySeq = 0;
  const viaService = async (caller: number): Promise<ServiceSample> => {
    callsMade++;
    const sentAt = wallNow();
    const t0 = performance.now();
    const reply = await client.post(CREATE_JOB, {
      input: summarizeInput(`${keyPrefix}-${++keySeq}`, { provider: PROVIDER, fallbackProviders: [], attemptTimeoutMs: ATTEMPT_TIMEOUT_MS }),
    });
    const t1 = performance.now();
    const created = dataOf(reply, 'createJob').createJob;
    if (created.replayed !== false) throw new Error('createJob replayed a job for a fresh key');
    const jobId: string = created.job.id;
    const socket = sockets[caller]!;
    const t2 = await new Promise<number>((resolve, reject) => {
      let unsubscribe = () => {};
      let settled = false;
      const finish = (err?: Error, at?: number) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unsubscribe();
        if (err) reject(err);
        else resolve(at!);
      };
      const timer = setTimeout(() => finish(new Error(`no JOB_SUCCEEDED within ${PER_ATTEMPT_TIMEOUT_MS} ms${socketError ? ` (${socketError})` : ''}`)), PER_ATTEMPT_TIMEOUT_MS);
      unsubscribe = socket.subscribe<{ jobEvents: { type: string; message: string } }>(
        { query: JOB_EVENTS, variables: { jobId, afterSeq: 0 } },
        {
          next: (msg) => {
            const at = performance.now();
            const event = msg.data?.jobEvents;
            if (!event) return finish(new Error(`subscription error: ${JSON.stringify(msg.errors)}`));
            if (event.type === 'JOB_SUCCEEDED') return finish(undefined, at);
            if (['JOB_FAILED', 'ATTEMPT_FAILED', 'ATTEMPT_UNKNOWN', 'JOB_CANCELLED'].includes(event.type)) {
              finish(new Error(`${event.type}: ${event.message}`));
            }
          },
          error: (err) => finish(err instanceof Error ? err : new Error(`subscription closed: ${JSON.stringify(err)}`)),
          complete: () => finish(new Error('the subscription completed before JOB_SUCCEEDED')),
        },
      );
    });
    return { total: t2 - t0, createJob: t1 - t0, afterAnswer: t2 - t1, jobId, sentAt, receivedAt: sentAt + (t2 - t0) };
  };

  try {
    // Warm-ups: connections (fetch's pool, the HTTP agent, the sockets), JIT, and instance C's first
    // token count, which builds the o200k_base encoder (~1 s).
    progress(`warm-up: ${opts.warmup} direct calls and ${opts.warmup} attempts through instance C`);
    const warm = await series(opts.warmup, 1, 60_000, () => direct());
    const warmService = await series(opts.warmup, 1, 60_000, (i) => viaService(i));
    if (warm.failed || warmService.failed) {
      throw new Error(`warm-up failed: direct ${warm.firstError ?? 'ok'}; service ${warmService.firstError ?? 'ok'}`);
    }

    const result: SeriesPair[] = [];
    const countsPerSeries: { before: QueryCounts; after: QueryCounts; attempts: number }[] = [];
    for (const concurrency of [1, opts.concurrency]) {
      progress(`${opts.n} direct calls and ${opts.n} attempts, ${concurrency} at a time`);
      const directCpu = cpuWindow();
      const d = await series(opts.n, concurrency, opts.seriesBudgetMs, () => direct());
      const dc = directCpu.end();
      const before = await c.queryCounts();
      const c0 = await c.stats();
      const serviceCpu = cpuWindow();
      const s = await series(opts.n, concurrency, opts.seriesBudgetMs, (i) => viaService(i));
      const sc = serviceCpu.end();
      const c1 = await c.stats();
      // Statements still on their way for the last attempts (the settle's commit is before JOB_SUCCEEDED
      // reaches us, but the hub's read that delivered it is counted when its checkout is released).
      await new Promise((r) => setTimeout(r, 100));
      const after = await c.queryCounts();
      countsPerSeries.push({ before, after, attempts: s.values.length + s.failed });
      result.push({
        concurrency,
        direct: d,
        service: s,
        directLatency: summarize(d.values),
        serviceTotal: summarize(s.values.map((v) => v.total)),
        serviceCreateJob: summarize(s.values.map((v) => v.createJob)),
        serviceAfterAnswer: summarize(s.values.map((v) => v.afterAnswer)),
        cpu: {
          directSelfMs: (1000 * dc.selfCpuS) / Math.max(1, d.values.length + d.failed),
          directMachineCores: dc.machineCpuS === undefined ? undefined : dc.machineCpuS / dc.wallS,
          serviceInstanceMs: (c1.cpuUs - c0.cpuUs) / 1000 / Math.max(1, s.values.length + s.failed),
          serviceSelfMs: (1000 * sc.selfCpuS) / Math.max(1, s.values.length + s.failed),
          serviceMachineCores: sc.machineCpuS === undefined ? undefined : sc.machineCpuS / sc.wallS,
        },
      });
    }

    // --- where the time goes, from the timestamps instance C wrote (its wall clock, ms resolution) --------
    const sequential = result[0]!.service.values;
    const { rows } = await pool.query<{ job_id: string; started: number; dispatched: number; running: number; succeeded: number }>(
      `SELECT a.job_id,
              extract(epoch FROM a.started_at) * 1000 AS started,
              extract(epoch FROM a.dispatched_at) * 1000 AS dispatched,
              (SELECT extract(epoch FROM e.at) * 1000 FROM job_events e WHERE e.job_id = a.job_id AND e.type = 'ATTEMPT_RUNNING') AS running,
              (SELECT extract(epoch FROM e.at) * 1000 FROM job_events e WHERE e.job_id = a.job_id AND e.type = 'JOB_SUCCEEDED') AS succeeded
       FROM attempts a WHERE a.job_id = ANY($1::uuid[])`,
      [sequential.map((v) => v.jobId)],
    );
    const byJob = new Map(rows.map((r) => [r.job_id, r]));
    const step = (what: string, f: (v: ServiceSample, r: (typeof rows)[number]) => number) => {
      const s = summarize(sequential.filter((v) => byJob.has(v.jobId)).map((v) => f(v, byJob.get(v.jobId)!)));
      return { what, p50: s.p50, p99: s.p99 };
    };
    const timeline: Timeline = {
      n: byJob.size,
      steps: [
        step('createJob sent here -> its `now` (attempt started_at)', (v, r) => Number(r.started) - v.sentAt),
        step('started_at -> the claim\'s `now` (dispatched_at)', (_, r) => Number(r.dispatched) - Number(r.started)),
        step('dispatched_at -> the provider answered (ATTEMPT_RUNNING at)', (_, r) => Number(r.running) - Number(r.dispatched)),
        step('ATTEMPT_RUNNING -> the settle\'s `now` (JOB_SUCCEEDED at)', (_, r) => Number(r.succeeded) - Number(r.running)),
        step('JOB_SUCCEEDED at -> received here', (v, r) => v.receivedAt - Number(r.succeeded)),
      ],
    };

    // --- statements per attempt ------------------------------------------------------------------
    const classified = countsPerSeries.map(({ before, after, attempts }) => ({ attempts, ...classify(after, delta(before, after)) }));
    const order = ['createJob', 'claim', 'prompt tokens', 'mark running', 'settle', 'claim (found nothing)', 'event delivery', 'background'];
    const notes = new Map(PHASES.filter((p) => p.note).map((p) => [p.phase, p.note]));
    notes.set('claim (found nothing)', "the runner's claims that found nothing: its 250 ms poll, wake-ups for attempts another claim took");
    const statements: StatementRow[] = order.map((phase) => ({
      phase,
      note: notes.get(phase) ?? '',
      perAttempt: classified.map((c) => (phase === 'claim (found nothing)' ? c.emptyClaims : (c.byPhase.get(phase) ?? 0)) / c.attempts),
    }));
    const unclassifiedTexts = new Set(classified.flatMap((c) => [...c.unclassified.keys()]));
    return {
      baseUrl: fake.baseUrl,
      series: result,
      timeline,
      statements,
      statementsTotal: classified.map((c) => c.statements / c.attempts),
      checkoutsTotal: classified.map((c) => c.checkouts / c.attempts),
      unclassified: [...unclassifiedTexts].map((text) => ({ text, perAttempt: classified.map((c) => (c.unclassified.get(text) ?? 0) / c.attempts) })),
      synchronousCommit: (await pool.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit,
      fakeAnswers: await fake.requests(),
      callsMade,
    };
  } finally {
    await Promise.all(sockets.map((s) => s.dispose()));
    agent.destroy();
    await c.stop();
    await fake.stop();
  }
}
