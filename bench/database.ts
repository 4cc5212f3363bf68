// The bench's own database: CREATE DATABASE onejob_bench_<random> on the server DATABASE_URL names
// (or the embedded Postgres), migrated, and dropped at the end.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase, type DatabaseLocation } from '../db/database.ts';
import { migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';

export interface BenchDatabase {
  name: string;
  url: string;
  server: DatabaseLocation;
  postgresVersion: string;
  maxConnections: number;
  /** Drops the bench database and stops the embedded server if this process started it. */
  drop(): Promise<void>;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** The URL with any password hidden, for printing. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

async function admin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl, application_name: 'onejob-bench-admin' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createBenchDatabase(): Promise<BenchDatabase> {
  const server = await openDatabase();
  const name = `onejob_bench_${randomBytes(4).toString('hex')}`;
  const { version, maxConnections } = await admin(server.adminUrl, async (c) => {
    await c.query(`CREATE DATABASE ${name}`);
    const v = await c.query<{ server_version: string }>('SHOW server_version');
    const m = await c.query<{ max_connections: string }>('SHOW max_connections');
    return { version: v.rows[0]!.server_version, maxConnections: Number(m.rows[0]!.max_connections) };
  });
  const url = withDatabase(server.adminUrl, name);
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    try {
      await admin(server.adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    } finally {
      await server.stop();
    }
  };
  try {
    const pool = createPool(url, 2);
    try {
      await migrate(pool);
    } finally {
      await pool.end();
    }
  } catch (err) {
    await drop().catch(() => {});
    throw err;
  }
  return { name, url, server, postgresVersion: version, maxConnections, drop };
}
