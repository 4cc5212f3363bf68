// Figure 1: createJob with fresh keys at N concurrent HTTP clients, against the same SQL statement
// (db/jobs.ts claimKeyAndCreateJob) run straight through pg at the same concurrency: the database's
// own ceiling for this work.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../core/caller.ts';
import { requestFingerprint } from '../core/fingerprint.ts';
import { claimKeyAndCreateJob } from '../db/jobs.ts';
import { createPool } from '../db/pool.ts';
import { closedLoop, GraphQLHttpClient, type ClosedLoopResult } from './http.ts';
import type { RunningInstance } from './instances.ts';
import { BENCH_CONFIG } from './config.ts';
import { PgMonitor, type PgWindow } from './pgMonitor.ts';
import type { ProfileSummary } from './profile.ts';
import { CREATE_JOB, SUMMARY_TEXT, summarizeInput } from './queries.ts';
import { cpuWindow, summarize, type Summary } from './stats.ts';

export interface ThroughputOptions {
  concurrency: number;
  durationMs: number;
  warmupMs: number;
  rounds: number;
  profileMs: number;
}

export interface WindowResult extends ClosedLoopResult {
  rps: number;
  /**
   * CPU seconds in the window: the instance's process, the bench process, the Postgres backends of the
   * bench database, and whatever else ran on the machine meanwhile.
   */
  cpu: { instanceS?: number; benchS: number; postgresS?: number; otherS?: number };
  pg: PgWindow;
  /** Mean of the instance's pg pool waiting-queue length, sampled every 100 ms (service only). */
  poolWaitingMean?: number;
}

export interface ThroughputResult {
  service: WindowResult[];
  direct: WindowResult[];
  serviceRps: number;
  directRps: number;
  serviceLatency: Summary;
  directLatency: Summary;
  appPoolMax: number;
  profile?: ProfileSummary;
}

let keySeq = 0;
const freshKey = (tag: string) => `${tag}-${process.pid}-${++keySeq}`;

export async function runThroughput(
  instance: RunningInstance,
  owner: { token: string; caller: Caller },
  databaseUrl: string,
  opts: ThroughputOptions,
  progress: (line: string) => void,
  forceProfile: boolean,
): Promise<ThroughputResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.concurrency });
  const client = new GraphQLHttpClient(instance.graphqlUrl, owner.token, agent);
  const viaService = async () => {
    const reply = await client.post(CREATE_JOB, { input: summarizeInput(freshKey('tp')) });
    if (reply.errors?.length || reply.data?.createJob?.replayed !== false) {
      throw new Error(`createJob answered HTTP ${reply.status} ${JSON.stringify(reply.errors ?? reply.data)}`);
    }
  };

  // The pool the app builds for itself (db/pool.ts createPool with its default size).
  const pool = createPool(databaseUrl);
  const appPoolMax = pool.options.max;
  const provider = 'primary';
  const fallbackProviders = ['backup'];
  const input = { text: SUMMARY_TEXT };
  const direct = async () => {
    // The same work createJob does around the statement: fingerprint, ids, times.
    const now = new Date();
    const claim = await claimKeyAndCreateJob(pool, {
      ownerId: owner.caller.ownerId,
      idempotencyKey: freshKey('direct'),
      jobId: randomUUID(),
      attemptId: randomUUID(),
      operation: 'summarize',
      provider,
      fallbackProviders,
      input,
      attemptTimeoutMs: null,
      fingerprint: requestFingerprint({ operation: 'summarize', provider, fallbackProviders, input, attemptTimeoutMs: null }),
      now,
      keyExpiresAt: new Date(now.getTime() + 3 * BENCH_CONFIG.idempotency.senderRetryWindowSeconds * 1000),
      attemptState: 'RUNNING',
      attemptDeadlineMs: BENCH_CONFIG.providers[provider]!.timeoutMs,
    });
    if (claim.kind !== 'created') throw new Error(`claimKeyAndCreateJob answered ${claim.kind}`);
  };

  const measure = async (label: string, op: () => Promise<void>, withInstance: boolean): Promise<WindowResult> => {
    const before = withInstance ? await instance.stats() : undefined;
    const waiting: number[] = [];
    const sampler = withInstance
      ? setInterval(() => void instance.stats().then((s) => waiting.push(s.pool.waiting), () => {}), 100)
      : undefined;
    const pgWindow = await monitor.start();
    const cpu = cpuWindow();
    const r = await closedLoop(opts.concurrency, opts.durationMs, op);
    const c = cpu.end();
    clearInterval(sampler);
    const pg = await pgWindow.end();
    const after = withInstance ? await instance.stats() : undefined;
    const instanceS = before && after ? (after.cpuUs - before.cpuUs) / 1e6 : undefined;
    const postgresS = pg.backendCpuS;
    const otherS =
      c.machineCpuS === undefined || postgresS === undefined
        ? undefined
        : Math.max(0, c.machineCpuS - c.selfCpuS - (instanceS ?? 0) - postgresS);
    const rps = r.ok / r.wallS;
    progress(`${label}: ${Math.round(rps)} req/s, ${r.failed} failed`);
    return {
      ...r,
      rps,
      pg,
      cpu: { instanceS, benchS: c.selfCpuS, postgresS, otherS },
      poolWaitingMean: waiting.length ? waiting.reduce((s, v) => s + v, 0) / waiting.length : undefined,
    };
  };

  const monitor = await PgMonitor.open(databaseUrl);
  const service: WindowResult[] = [];
  const directs: WindowResult[] = [];
  try {
    for (let round = 1; round <= opts.rounds; round++) {
      const warm = round === 1 ? opts.warmupMs * 2 : opts.warmupMs;
      await closedLoop(opts.concurrency, warm, viaService);
      service.push(await measure(`round ${round} service`, viaService, true));
      await closedLoop(opts.concurrency, warm, direct);
      directs.push(await measure(`round ${round} direct`, direct, false));
    }
    const total = (ws: WindowResult[]) => ws.reduce((s, w) => s + w.ok, 0) / ws.reduce((s, w) => s + w.wallS, 0);
    const result: ThroughputResult = {
      service,
      direct: directs,
      serviceRps: total(service),
      directRps: total(directs),
      serviceLatency: summarize(service.flatMap((w) => w.latenciesMs)),
      directLatency: summarize(directs.flatMap((w) => w.latenciesMs)),
      appPoolMax,
    };
    if (forceProfile || result.serviceRps / result.directRps < 0.5) {
      progress(`profiling the instance for ${opts.profileMs} ms (a separate window, not counted above)`);
      await instance.profileStart();
      await closedLoop(opts.concurrency, opts.profileMs, viaService);
      result.profile = await instance.profileStop();
    }
    return result;
  } finally {
    agent.destroy();
    await pool.end();
    await monitor.close();
  }
}
