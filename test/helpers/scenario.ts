// Steps that many tests share: create a job, push an attempt to UNKNOWN, report as an operator.
import { expect } from 'vitest';
import type { ManualClock } from '../../clock.ts';
import { sweepOverdueAttempts } from '../../core/deadlines.ts';
import type { Pool } from '../../db/pool.ts';
import { CANCEL_ATTEMPT, CREATE_JOB, REPORT, RETRY_JOB, dataOf, gql, summarizeInput } from './graphql.ts';
import type { Instance } from './instance.ts';

export async function createSummarizeJob(api: Instance, token: string, key: string, extra: Record<string, unknown> = {}) {
  return dataOf(await gql(api.graphqlUrl, token, CREATE_JOB, { input: summarizeInput(key, extra) })).createJob.job as {
    id: string;
    version: number;
    attempts: { id: string; number: number; state: string }[];
  };
}

/** Moves the clock past every deadline and runs the sweep once, as the sweeper would. */
export async function timeOut(api: Instance, clock: ManualClock, ms = 31_000): Promise<number> {
  clock.advance(ms);
  return sweepOverdueAttempts(api.app.core);
}

export async function report(api: Instance, operatorToken: string, attemptId: string, outcome: { result?: unknown; error?: string }) {
  return gql(api.graphqlUrl, operatorToken, REPORT, { attemptId, ...outcome });
}

export async function cancelAttemptOk(api: Instance, operatorToken: string, attemptId: string, reason = 'provider unreachable') {
  return dataOf(await gql(api.graphqlUrl, operatorToken, CANCEL_ATTEMPT, { attemptId, reason })).cancelAttempt;
}

export async function retryOk(api: Instance, token: string, jobId: string, provider?: string) {
  return dataOf(await gql(api.graphqlUrl, token, RETRY_JOB, { jobId, provider })).retryJob as {
    id: string;
    number: number;
    provider: string;
    state: string;
    readVersion: number;
  };
}

export async function eventTypes(pool: Pool, jobId: string): Promise<string[]> {
  const { rows } = await pool.query('SELECT seq, type FROM job_events WHERE job_id = $1 ORDER BY seq', [jobId]);
  rows.forEach((r, i) => expect(r.seq).toBe(i + 1)); // gap-free
  return rows.map((r) => r.type);
}
