// Expected refusals, each with the stable code of CONTRACT.md section 5. The GraphQL layer turns a
// DomainError into a GraphQL error with that code; anything else is masked as INTERNAL_SERVER_ERROR.

export const ERROR_CODES = [
  'UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'UNKNOWN_OPERATION', 'UNKNOWN_PROVIDER',
  'IDEMPOTENCY_KEY_REUSED', 'ATTEMPT_IN_FLIGHT', 'JOB_CLOSED', 'PROVIDER_NOT_ALLOWED', 'PROVIDER_NOT_CERTIFIED',
  'ATTEMPT_NOT_LIVE',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const notFound = (what: string, id: string) =>
  new DomainError('NOT_FOUND', `No ${what} with id ${id} is visible to you. Check the id.`, { id });

export const badInput = (field: string, problem: string) =>
  new DomainError('BAD_USER_INPUT', `${field}: ${problem}`, { field });
