import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';

// The package is CommonJS (module.exports = fn) but its typings declare a default export.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

export interface FingerprintedRequest {
  operation: string;
  provider: string;
  fallbackProviders: string[];
  input: unknown;
  attemptTimeoutMs: number | null;
}

/**
 * Rule 2: SHA-256 of the canonical JSON (RFC 8785: keys sorted, numbers normalised) of the request's
 * meaning. An omitted fallbackProviders is [] and an omitted attemptTimeoutMs is null, so leaving out a
 * default and spelling it as [] are the same request.
 */
export function requestFingerprint(r: FingerprintedRequest): string {
  const canonical = canonicalize({
    operation: r.operation,
    provider: r.provider,
    fallbackProviders: r.fallbackProviders,
    input: r.input,
    attemptTimeoutMs: r.attemptTimeoutMs,
  });
  return createHash('sha256').update(canonical!).digest('hex');
}
