// Owners and their bearer tokens. Only a token's SHA-256 is stored.
import type { Queryable } from './pool.ts';

export type Role = 'owner' | 'operator';

export interface TokenHolder {
  ownerId: number;
  ownerName: string;
  role: Role;
}

/** Creates the owner if it is new, then stores the token's hash for it. */
export async function storeToken(q: Queryable, p: { ownerName: string; role: Role; tokenHash: Buffer }): Promise<TokenHolder> {
  const { rows } = await q.query(
    `WITH owner AS (
       INSERT INTO owners (name) VALUES ($1)
       ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
       RETURNING id, name
     )
     INSERT INTO tokens (token_hash, owner_id, role) SELECT $3, id, $2 FROM owner
     RETURNING owner_id, (SELECT name FROM owner) AS owner_name, role`,
    [p.ownerName, p.role, p.tokenHash],
  );
  const r = rows[0]!;
  return { ownerId: r.owner_id, ownerName: r.owner_name, role: r.role };
}

export async function findTokenHolder(q: Queryable, tokenHash: Buffer): Promise<TokenHolder | undefined> {
  const { rows } = await q.query(
    `SELECT t.owner_id, o.name AS owner_name, t.role FROM tokens t JOIN owners o ON o.id = t.owner_id
     WHERE t.token_hash = $1`,
    [tokenHash],
  );
  const r = rows[0];
  return r ? { ownerId: r.owner_id, ownerName: r.owner_name, role: r.role } : undefined;
}

export async function countTokens(q: Queryable): Promise<number> {
  const { rows } = await q.query('SELECT count(*)::int AS n FROM tokens');
  return rows[0].n as number;
}
