// Each test file gets its own database, cloned from the migrated template (fast: a file copy).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, inject } from 'vitest';
import { createPool, type Pool } from '../../db/pool.ts';
import { withDatabase } from './globalSetup.ts';

export interface TestDatabase {
  url: string;
  name: string;
  /** A pool for the test's own reads and holds (not the app's). */
  pool: Pool;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: inject('adminUrl') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates a fresh database for this test file and drops it after the file's tests. */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const name = `onejob_t_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase().slice(0, 30)}_${randomBytes(3).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${inject('templateDatabase')}`));
  const url = withDatabase(inject('adminUrl'), name);
  const pool = createPool(url, 60);
  afterAll(async () => {
    await pool.end();
    await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  });
  return { url, name, pool };
}

/** An empty database (no migrations), for testing migrations themselves. */
export async function createEmptyDatabase(label: string): Promise<{ url: string }> {
  const name = `onejob_e_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase().slice(0, 30)}_${randomBytes(3).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  afterAll(() => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)));
  return { url: withDatabase(inject('adminUrl'), name) };
}
