// Figure 2: N clients, each already connected (one warm keep-alive connection per client), send the
// same createJob (same key, same payload) at once, spread over the given instances. Exactly one job
// must result and exactly one answer may say replayed: false (contract rules 1 and 4).
import http from 'node:http';
import type { Pool } from '../db/pool.ts';
import { GraphQLHttpClient } from './http.ts';
import type { RunningInstance } from './instances.ts';
import { PgMonitor, type PgWindow } from './pgMonitor.ts';
import { CREATE_JOB, summarizeInput } from './queries.ts';
import { summarize, type Summary } from './stats.ts';

export interface StormResult {
  requests: number;
  instances: number;
  answered: number;
  distinctJobIds: number;
  replayedFalse: number;
  replayedTrue: number;
  errors: Map<string, number>;
  jobsInDatabase: number;
  latency: Summary;
  wallMs: number;
  pg: PgWindow;
}

const CONNECT_BATCH = 100;

export async function runStorm(
  instances: RunningInstance[],
  token: string,
  pool: Pool,
  requests: number,
  databaseUrl: string,
): Promise<StormResult> {
  const monitor = await PgMonitor.open(databaseUrl);
  const agents = Array.from({ length: requests }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const clients = agents.map((agent, i) => new GraphQLHttpClient(instances[i % instances.length]!.graphqlUrl, token, agent, 60_000));
  try {
    // Connect every client first (in batches, as clients arriving over time would), so the storm
    // measures the service and not 1,000 simultaneous TCP handshakes against the listen backlog.
    for (let i = 0; i < clients.length; i += CONNECT_BATCH) {
      await Promise.all(clients.slice(i, i + CONNECT_BATCH).map((c) => c.post('{ __typename }')));
    }
    const key = `storm-${process.pid}-${Date.now()}`;
    const variables = { input: summarizeInput(key) };
    const ids = new Set<string>();
    const errors = new Map<string, number>();
    let replayedFalse = 0;
    let replayedTrue = 0;
    const latencies: number[] = [];
    const pgWindow = await monitor.start();
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c) => {
        const start = performance.now();
        try {
          const reply = await c.post(CREATE_JOB, variables);
          latencies.push(performance.now() - start);
          const payload = reply.data?.createJob as { replayed: boolean; job: { id: string } } | undefined;
          if (reply.errors?.length || !payload) {
            const code = String(reply.errors?.[0]?.extensions?.code ?? `HTTP ${reply.status}`);
            errors.set(code, (errors.get(code) ?? 0) + 1);
            return;
          }
          ids.add(payload.job.id);
          if (payload.replayed) replayedTrue++;
          else replayedFalse++;
        } catch (err) {
          const code = (err as Error).message;
          errors.set(code, (errors.get(code) ?? 0) + 1);
        }
      }),
    );
    const wallMs = performance.now() - t0;
    const pg = await pgWindow.end();
    const { rows } = await pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM jobs WHERE idempotency_key = $1',
      [key],
    );
    return {
      requests,
      instances: instances.length,
      answered: latencies.length,
      distinctJobIds: ids.size,
      replayedFalse,
      replayedTrue,
      errors,
      jobsInDatabase: rows[0]!.n,
      latency: summarize(latencies),
      wallMs,
      pg,
    };
  } finally {
    for (const a of agents) a.destroy();
    await monitor.close();
  }
}
