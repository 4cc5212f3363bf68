// What every provider adapter does, whatever API it speaks. The attempt runner (providers/runner.ts)
// is the only caller of call(); certification (providers/certification.ts) calls it for fixtures.

/** The prompt as the operation's template rendered it for one input. */
export interface Prompt {
  system: string;
  user: string;
}

export interface CallRequest {
  /** The attempt's id, sent as the request's idempotency/request id where the provider accepts one. */
  attemptId: string;
  operation: string;
  /** The job's input. Real providers see only the prompt; the simulated one answers from this. */
  input: unknown;
  prompt: Prompt;
  /** JSON Schema of the operation's output (strict: additionalProperties false), for structured output. */
  outputSchema: Record<string, unknown>;
  /** Most tokens the output may take. */
  maxOutputTokens: number;
  /** Aborted at the attempt's deadline (or when the instance stops). */
  signal: AbortSignal;
  /** The attempt's deadline; waits (a 429's Retry-After) that would pass it are not taken. */
  deadline: Date;
  /** The provider has accepted the request (STARTING → RUNNING); providerRequestId is its own id, if any. */
  onAccepted(providerRequestId?: string): Promise<void>;
}

export type CallOutcome =
  /** The provider answered with output (parsed JSON, not yet checked against the contract). */
  | { kind: 'result'; output: unknown; usageTokens?: number; providerRequestId?: string }
  /** A definitive failure: the provider refused, answered unusably, or surely never did the work. */
  | { kind: 'failed'; reason: string; providerRequestId?: string }
  /** Nobody knows whether the provider did the work: a timeout, a reset after sending, a 502/504. */
  | { kind: 'unknown'; reason: string; providerRequestId?: string }
  /** Accepted and still being worked on (background mode): ask again with retrieve(). */
  | { kind: 'pending'; providerRequestId: string };

export interface ProviderAdapter {
  call(request: CallRequest): Promise<CallOutcome>;
  /**
   * Asks the provider what became of an earlier request (reconciliation). `providerRequestId` is the id the
   * provider gave, or undefined when it never gave one (then the adapter may look up by attempt id).
   * Adapters of providers that cannot be asked leave this out.
   */
  retrieve?(q: { attemptId: string; providerRequestId?: string }, signal: AbortSignal): Promise<CallOutcome>;
  /** Asks the provider to stop working on a request, where it can. */
  cancel?(q: { attemptId: string; providerRequestId?: string }, signal: AbortSignal): Promise<void>;
}
