// Each owner's callback URL and signing secret (CONTRACT.md section 8). One exported function per statement.
import type { Queryable } from './pool.ts';

export interface Callback {
  ownerId: number;
  url: string;
  secret: string;
  updatedAt: Date;
}

const toCallback = (r: Record<string, unknown>): Callback => ({
  ownerId: r.owner_id as number,
  url: r.url as string,
  secret: r.secret as string,
  updatedAt: r.updated_at as Date,
});

/**
 * Stores the owner's callback, replacing URL and secret together (one row per owner). Notifications
 * already queued keep the URL and secret they were captured with.
 */
export async function upsertCallback(q: Queryable, p: { ownerId: number; url: string; secret: string; now: Date }): Promise<Callback> {
  const { rows } = await q.query(
    `INSERT INTO callbacks (owner_id, url, secret, updated_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (owner_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at
     RETURNING *`,
    [p.ownerId, p.url, p.secret, p.now],
  );
  return toCallback(rows[0]!);
}

export async function findCallback(q: Queryable, ownerId: number): Promise<Callback | undefined> {
  const { rows } = await q.query('SELECT * FROM callbacks WHERE owner_id = $1', [ownerId]);
  return rows[0] ? toCallback(rows[0]) : undefined;
}
