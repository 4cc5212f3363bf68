// Deterministic holds for race tests: instead of hoping requests overlap, the test holds a lock that
// every contender needs, waits until the contenders are all queued on it, then lets them go at once.
import type { PoolClient } from 'pg';
import type { Pool } from '../../db/pool.ts';

export interface Hold {
  release(): Promise<void>;
}

/** Holds a lock (any SQL that takes one) in an open transaction until released. */
export async function holdLock(pool: Pool, sql: string, params: unknown[] = []): Promise<Hold> {
  const client: PoolClient = await pool.connect();
  await client.query('BEGIN');
  await client.query(sql, params);
  return {
    async release() {
      await client.query('ROLLBACK');
      client.release();
    },
  };
}

/** Holds the job's row lock, which every change to the job takes first. */
export const holdJob = (pool: Pool, jobId: string) => holdLock(pool, 'SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE', [jobId]);

/** Waits (polling the server's own view, not the clock) until `n` backends of the database wait on a lock. */
export async function waitForLockWaiters(pool: Pool, database: string, n: number, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`,
      [database],
    );
    if (rows[0].n >= n) return;
    if (Date.now() > until) throw new Error(`only ${rows[0].n} of ${n} backends queued on the lock`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
