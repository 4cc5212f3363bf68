import type { Pool, PoolClient } from './pool.ts';
import { isRetryable } from './errors.ts';

const MAX_TRANSACTION_TRIES = 5;

/**
 * Runs fn in one READ COMMITTED transaction. A deadlock or serialization failure rolls back and runs
 * fn again from the start, so fn must not have effects outside the database.
 */
export async function inTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const value = await fn(client);
      await client.query('COMMIT');
      return value;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      if (attempt < MAX_TRANSACTION_TRIES && isRetryable(err)) continue;
      throw err;
    } finally {
      client.release();
    }
  }
}
