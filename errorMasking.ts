// One place decides what a client sees of an error: a DomainError keeps its contract code and
// message; a GraphQL request or validation error keeps its message and is coded BAD_USER_INPUT;
// anything else is masked as INTERNAL_SERVER_ERROR and logged with an id the client can quote.
import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import type { Logger } from 'pino';
import { DomainError, ERROR_CODES } from './core/errors.ts';

const CONTRACT_CODES = new Set<string>([...ERROR_CODES, 'INTERNAL_SERVER_ERROR']);

/** HTTP status for refusals outside execution (no token, body too large). */
const HTTP_STATUS: Partial<Record<string, number>> = { UNAUTHENTICATED: 401 };

function domainToGraphQL(err: DomainError, from?: GraphQLError): GraphQLError {
  const status = HTTP_STATUS[err.code];
  return new GraphQLError(err.message, {
    nodes: from?.nodes,
    path: from?.path,
    extensions: { ...err.details, code: err.code, ...(status ? { http: { status } } : {}) },
  });
}

export function createMaskError(log: Logger) {
  return (error: unknown): Error => {
    if (error instanceof DomainError) return domainToGraphQL(error);
    if (error instanceof GraphQLError) {
      const original = error.originalError;
      if (original instanceof DomainError) return domainToGraphQL(original, error);
      if (original instanceof GraphQLError && original !== error) return createMaskError(log)(original);
      if (!original || original instanceof GraphQLError) {
        const code = error.extensions?.code;
        if (typeof code === 'string' && CONTRACT_CODES.has(code)) return error;
        // Parse, validation, variable coercion, body size and armor limits: the request is at fault.
        return new GraphQLError(error.message, {
          nodes: error.nodes,
          path: error.path,
          extensions: { ...error.extensions, code: 'BAD_USER_INPUT', ...(code ? { reason: code } : {}) },
        });
      }
    }
    const errorId = randomUUID();
    log.error({ err: error, errorId }, 'unexpected error (masked from the client)');
    return new GraphQLError(`Internal server error; it was logged as ${errorId}.`, {
      extensions: { code: 'INTERNAL_SERVER_ERROR', errorId },
    });
  };
}
