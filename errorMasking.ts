// One place decides what a client sees of an error: a DomainError keeps its contract code and
// message; a GraphQL request or validation error keeps its message and is coded BAD_USER_INPUT;
// anything else is masked as INTERNAL_SERVER_ERROR and logged with an id the client can quote.
import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { DatabaseError } from 'pg';
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

/**
 * SQLSTATEs that only a value the client sent can cause: text or JSON with U+0000, or bytes that are not
 * UTF-8. A backstop for any field whose own check missed it; the write was rolled back.
 */
const UNSTORABLE_TEXT = new Set(['22021', '22P05']);

export function createMaskError(log: Logger) {
  return (error: unknown): Error => {
    if (error instanceof DomainError) return domainToGraphQL(error);
    // What was thrown first: GraphQL wraps errors (a resolver's, a scalar's) in located ones.
    let cause: unknown = error;
    while (cause instanceof GraphQLError && cause.originalError && cause.originalError !== cause) cause = cause.originalError;
    const outer = error instanceof GraphQLError ? error : undefined;
    if (cause instanceof DomainError) return domainToGraphQL(cause, outer);
    if (cause instanceof DatabaseError && cause.code && UNSTORABLE_TEXT.has(cause.code)) {
      return new GraphQLError('A text or JSON value contains a character that cannot be stored (such as \\u0000). Remove it and send again.', {
        nodes: outer?.nodes,
        path: outer?.path,
        extensions: { code: 'BAD_USER_INPUT' },
      });
    }
    if (outer && cause instanceof GraphQLError) {
      // Only GraphQL errors all the way down: parse, validation, variable coercion (whose outer message
      // names the variable and the path in it), body size and armor limits. The request is at fault.
      const code = outer.extensions?.code;
      if (typeof code === 'string' && CONTRACT_CODES.has(code)) return outer;
      return new GraphQLError(outer.message, {
        nodes: outer.nodes,
        path: outer.path,
        extensions: { ...outer.extensions, code: 'BAD_USER_INPUT', ...(code ? { reason: code } : {}) },
      });
    }
    const errorId = randomUUID();
    log.error({ err: error, errorId }, 'unexpected error (masked from the client)');
    return new GraphQLError(`Internal server error; it was logged as ${errorId}.`, {
      extensions: { code: 'INTERNAL_SERVER_ERROR', errorId },
    });
  };
}

/**
 * Yoga answers validation errors (unknown fields, wrong argument types, armor limits) without passing
 * them through maskError, so they would reach clients with codes outside the contract
 * (GRAPHQL_VALIDATION_FAILED). This hook gives them contract codes, on HTTP and WebSocket alike.
 */
export function useContractErrorCodes(maskError: (error: unknown) => Error): Plugin {
  return {
    onValidate: () => ({ valid, result, setResult }) => {
      if (!valid) setResult(result.map((error) => maskError(error) as GraphQLError));
    },
  };
}
