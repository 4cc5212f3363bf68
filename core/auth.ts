// Bearer tokens: 32 random bytes, shown once, stored as SHA-256. Lookups are cached briefly because
// every request carries a token and the hot path (createJob) should cost one statement, not two.
import { createHash, randomBytes } from 'node:crypto';
import { findTokenHolder, storeToken, type Role } from '../db/owners.ts';
import type { Queryable } from '../db/pool.ts';
import type { Caller } from './caller.ts';

const TOKEN_PREFIX = 'oj_';
const TOKEN_CACHE_TTL_MS = 30_000;
const TOKEN_CACHE_MAX_ENTRIES = 10_000;

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

export async function createToken(q: Queryable, ownerName: string, role: Role): Promise<{ token: string; caller: Caller }> {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const holder = await storeToken(q, { ownerName, role, tokenHash: hashToken(token) });
  return { token, caller: holder };
}

/**
 * Reads "Bearer TOKEN" (the scheme is case-insensitive); undefined when absent or malformed. A bare
 * onejob token (no scheme) is taken too: WebSocket clients often put just the token in connectionParams.
 */
export function bearerToken(header: string | null | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (match) return match[1];
  const bare = (header ?? '').trim();
  return bare.startsWith(TOKEN_PREFIX) && !/\s/.test(bare) ? bare : undefined;
}

export class Authenticator {
  private readonly cache = new Map<string, { caller: Caller; until: number }>();
  constructor(private readonly q: Queryable) {}

  async authenticate(token: string | undefined): Promise<Caller | undefined> {
    if (!token || token.length > 200) return undefined;
    const key = hashToken(token);
    const cacheKey = key.toString('base64');
    const hit = this.cache.get(cacheKey);
    if (hit && hit.until > Date.now()) return hit.caller;
    const holder = await findTokenHolder(this.q, key);
    if (!holder) return undefined;
    if (this.cache.size >= TOKEN_CACHE_MAX_ENTRIES) this.cache.clear();
    this.cache.set(cacheKey, { caller: holder, until: Date.now() + TOKEN_CACHE_TTL_MS });
    return holder;
  }
}
