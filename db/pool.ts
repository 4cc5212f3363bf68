import pg from 'pg';

// jsonb and timestamptz come back as JS values; bigint ids are small enough to be numbers here.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that can run one statement: the pool, or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

export function createPool(connectionString: string, max = 20): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, application_name: 'onejob' });
  // An idle client that loses its connection emits here; without a listener the process dies.
  pool.on('error', () => {});
  return pool;
}
