// The scripting model shared by the fake providers. A fake answers every request successfully unless the
// test queued a behaviour for it; queued behaviours are taken in order, so a test says "the first attempt
// gets a 429, the retry succeeds" as two entries, and never has to race the adapter to change the fake.
//
// Behaviours come in two families:
// - transport behaviours decide what happens on the wire (an error status, a delay, a hang, a reset);
// - content behaviours decide what a successful answer carries (good output, broken JSON, a refusal…).
// Each fake renders a content behaviour in its own API's format (see respond.ts for the shared part).

/** The endpoints the fakes implement. Scripts without `endpoint` apply to the generation endpoints only. */
export type Endpoint = 'chat.completions' | 'responses.create' | 'responses.retrieve' | 'responses.cancel' | 'messages';

/** Endpoints that make the model work; an entry without `endpoint` matches only these, never a poll or cancel. */
export const GENERATION_ENDPOINTS: ReadonlySet<Endpoint> = new Set(['chat.completions', 'responses.create', 'messages']);

/** Token counts to report instead of the fake's estimate (≈ characters / 4). */
export interface UsageOverride {
  inputTokens?: number;
  outputTokens?: number;
}

/** What a successful (HTTP 200) answer carries. */
export type ContentBehaviour =
  /** Valid output: `respond(request)`'s, or `output` verbatim when given. */
  | { kind: 'ok'; output?: unknown; usage?: UsageOverride }
  /**
   * Output that is not valid JSON (the valid output cut in half). `truncated: false` (default): the model
   * stopped normally (OpenAI finish_reason "stop"; Responses "completed"; Anthropic a text block with no
   * tool_use, stop_reason "end_turn"). `truncated: true`: it ran out of tokens (OpenAI finish_reason
   * "length"; Responses status "incomplete"; Anthropic stop_reason "max_tokens" with a partial tool input).
   */
  | { kind: 'malformedJson'; truncated?: boolean; usage?: UsageOverride }
  /** Valid JSON with one top-level key the strict schema forbids (default key "reasoning"). */
  | { kind: 'hallucinatedKey'; key?: string; usage?: UsageOverride }
  /** The model refuses: OpenAI message.refusal with content null; Anthropic stop_reason "refusal". */
  | { kind: 'refusal'; message?: string; usage?: UsageOverride }
  /** classify answers a label that is not in the request's list (default: "not-a-label", made unique). */
  | { kind: 'wrongLabel'; label?: string; usage?: UsageOverride };

/** What happens on the wire before (or instead of) a successful answer. */
export type TransportBehaviour =
  /**
   * Answers `status` with the provider's documented error body. `type`/`code`/`message` override the
   * defaults for that status. 429 sends `Retry-After: retryAfterSeconds` (default 1; null sends none);
   * other statuses send it only when `retryAfterSeconds` is a number. `rawBody` replaces the JSON body
   * (for example an HTML page from a gateway on 502).
   */
  | {
      kind: 'status';
      status: number;
      message?: string;
      type?: string;
      code?: string | null;
      retryAfterSeconds?: number | null;
      rawBody?: string;
    }
  /** Waits `ms`, then behaves as `then` (default ok). A client that gives up first just closes the socket. */
  | { kind: 'delay'; ms: number; then?: Behaviour }
  /** Reads the request and never answers: the connection stays open until the client aborts or stop(). */
  | { kind: 'hang' }
  /**
   * Reads the whole request, then resets the TCP connection (RST) without a byte of answer: the client
   * sent its request and cannot know whether the provider did the work.
   */
  | { kind: 'resetAfterReceive' };

export type Behaviour = ContentBehaviour | TransportBehaviour;
export type BehaviourKind = Behaviour['kind'];

/** Which requests a queued behaviour is for, and how many of them. */
export interface Match {
  /** How many matching requests get this behaviour (default 1; Infinity for all of them). */
  times?: number;
  /** Only requests carrying this `Idempotency-Key` header; these entries win over unkeyed ones. */
  idempotencyKey?: string;
  /** Only this endpoint; without it, any generation endpoint (never a poll or a cancel). */
  endpoint?: Endpoint;
}

/** A behaviour plus the requests it is for: `{ kind: 'status', status: 429, times: 2 }`. */
export type ScriptEntry = Behaviour & Match;

interface Queued {
  behaviour: Behaviour;
  remaining: number;
  idempotencyKey: string | undefined;
  endpoint: Endpoint | undefined;
}

export const OK: ContentBehaviour = { kind: 'ok' };

export class Script {
  private readonly queue: Queued[] = [];

  /** Queues entries in order: the first matching entry answers the next matching request. */
  add(...entries: ScriptEntry[]): void {
    for (const entry of entries) {
      const { times = 1, idempotencyKey, endpoint, ...behaviour } = entry;
      if (!(times >= 1)) throw new Error(`script entry ${entry.kind}: times must be at least 1`);
      this.queue.push({ behaviour: behaviour as Behaviour, remaining: times, idempotencyKey, endpoint });
    }
  }

  /**
   * The behaviour for one request, consumed from the queue: first an entry for its Idempotency-Key, then
   * an unkeyed one, else ok. Keyed entries first, so a test can target one attempt's retries precisely
   * while other traffic takes the general queue.
   */
  take(endpoint: Endpoint, idempotencyKey: string | undefined): Behaviour {
    const fits = (q: Queued) => (q.endpoint ? q.endpoint === endpoint : GENERATION_ENDPOINTS.has(endpoint));
    const found =
      (idempotencyKey !== undefined && this.queue.find((q) => q.idempotencyKey === idempotencyKey && fits(q))) ||
      this.queue.find((q) => q.idempotencyKey === undefined && fits(q));
    if (!found) return OK;
    found.remaining -= 1;
    if (found.remaining <= 0) this.queue.splice(this.queue.indexOf(found), 1);
    return found.behaviour;
  }

  /** How many queued entries are still waiting for a request (Infinity entries count once). */
  get pending(): number {
    return this.queue.length;
  }
}
