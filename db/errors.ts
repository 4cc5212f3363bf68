// Postgres errors classified by SQLSTATE in one place, so callers match on meaning, not on codes.
import { DatabaseError } from 'pg';

export const SQLSTATE = {
  UNIQUE_VIOLATION: '23505',
  CHECK_VIOLATION: '23514',
  FOREIGN_KEY_VIOLATION: '23503',
  SERIALIZATION_FAILURE: '40001',
  DEADLOCK_DETECTED: '40P01',
  INVALID_TEXT_REPRESENTATION: '22P02',
} as const;

/** Errors after which the whole transaction may be run again unchanged. */
const RETRYABLE = new Set<string>([SQLSTATE.SERIALIZATION_FAILURE, SQLSTATE.DEADLOCK_DETECTED]);

export function isRetryable(err: unknown): boolean {
  return err instanceof DatabaseError && err.code !== undefined && RETRYABLE.has(err.code);
}

export function isUniqueViolation(err: unknown, constraint: string): boolean {
  return err instanceof DatabaseError && err.code === SQLSTATE.UNIQUE_VIOLATION && err.constraint === constraint;
}
