// `onejob snapshot`: a canonical dump of everything the service keeps, for comparing two states byte
// for byte. Every table of the schema is included, rows in primary-key order, each row as canonical
// JSON (keys sorted), times as Postgres prints them (microseconds, UTC): nothing is left out, so any
// write — a timestamp, a counter, a "created by" — shows.
import canonicalizeModule from 'canonicalize';
import type { Pool, PoolClient } from '../db/pool.ts';

const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

export async function snapshot(pool: Pool): Promise<string> {
  const client = await pool.connect();
  try {
    // One consistent view, rendered in UTC whatever the server's time zone.
    await client.query(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`);
    await client.query(`SET LOCAL TIME ZONE 'UTC'`);
    return await dump(client);
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    client.release();
  }
}

async function dump(q: PoolClient): Promise<string> {
  const { rows: tables } = await q.query<{ name: string; key: string[] | null }>(
    `SELECT c.relname AS name,
            (SELECT array_agg(a.attname::text ORDER BY k.ord)
             FROM pg_index i
             CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k (attnum, ord)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE i.indrelid = c.oid AND i.indisprimary) AS key
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind = 'r'
     ORDER BY c.relname`,
  );
  const out: string[] = [];
  for (const { name, key } of tables) {
    const order = key?.length ? key.map((k) => `t.${quoteIdent(k)}`).join(', ') : 't::text';
    // to_jsonb(t)::text keeps Postgres's own rendering of times and numbers: nothing is rounded in JS.
    const { rows } = await q.query<{ row: string }>(`SELECT to_jsonb(t)::text AS row FROM ${quoteIdent(name)} t ORDER BY ${order}`);
    out.push(`# ${name} (${rows.length})`);
    for (const r of rows) out.push(canonicalize(JSON.parse(r.row))!);
  }
  // Sequences are state too: a consumed value that left no row still changes what comes next.
  const { rows: seqs } = await q.query<{ name: string; last_value: string | null }>(
    `SELECT sequencename AS name, last_value::text FROM pg_sequences WHERE schemaname = current_schema() ORDER BY sequencename`,
  );
  out.push(`# sequences (${seqs.length})`);
  for (const s of seqs) out.push(`${s.name} ${s.last_value ?? 'unused'}`);
  return `${out.join('\n')}\n`;
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
