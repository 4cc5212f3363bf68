// Subscriptions as a client sees them: graphql-ws and server-sent events, read with `for await` into an
// EventStream that tests wait on (a condition with a deadline that fails the test, never a sleep).
import type { Client } from 'graphql-ws';
import { onTestFinished } from 'vitest';
import { newWsClient } from './graphql.ts';

export const JOB_EVENTS = /* GraphQL */ `
  subscription Events($jobId: ID!, $afterSeq: Int) {
    jobEvents(jobId: $jobId, afterSeq: $afterSeq) {
      seq type jobId jobStatus attemptId attemptNumber attemptState provider message at
    }
  }`;

export interface JobEventMessage {
  seq: number;
  type: string;
  jobId: string;
  jobStatus: string;
  attemptId: string | null;
  attemptNumber: number | null;
  attemptState: string | null;
  provider: string | null;
  message: string | null;
  at: string;
}

interface ExecutionResultLike {
  data?: { jobEvents?: JobEventMessage } | null;
  errors?: readonly { message: string; extensions?: Record<string, unknown> }[];
}

const DEFAULT_WAIT_MS = 10_000;

/**
 * Reads one subscription with `for await` in the background. Every event is checked on arrival: it
 * must be the next seq after the last one (afterSeq + 1 first), so a gap or a duplicate is recorded as
 * a violation and fails every later wait at once.
 */
export class EventStream {
  readonly events: JobEventMessage[] = [];
  readonly errors: { message: string; extensions?: Record<string, unknown> }[] = [];
  readonly violations: string[] = [];
  ended = false;
  private failure: unknown;
  private waiters = new Set<() => void>();
  private readonly done: Promise<void>;

  constructor(
    private readonly source: AsyncIterable<ExecutionResultLike>,
    readonly afterSeq: number,
    private readonly close: () => void | Promise<void>,
    readonly label = 'subscription',
  ) {
    this.done = this.consume();
  }

  private async consume(): Promise<void> {
    try {
      for await (const result of this.source) {
        if (result.errors?.length) this.errors.push(...result.errors);
        const event = result.data?.jobEvents;
        if (event) {
          const expected = (this.events.at(-1)?.seq ?? this.afterSeq) + 1;
          if (event.seq !== expected) this.violations.push(`expected seq ${expected}, got ${event.seq} (${event.type})`);
          this.events.push(event);
        }
        this.notify();
      }
    } catch (err) {
      this.failure = err;
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  private notify(): void {
    for (const w of this.waiters) w();
  }

  get seqs(): number[] {
    return this.events.map((e) => e.seq);
  }

  /** Resolves once `condition` holds for the events so far; fails on a timeout, a violation, an error or the end. */
  until(condition: (events: JobEventMessage[]) => boolean, what: string, timeoutMs = DEFAULT_WAIT_MS): Promise<JobEventMessage[]> {
    return new Promise((resolve, reject) => {
      const describe = () =>
        `${this.label}: ${what}; received seqs [${this.seqs.join(',')}] ` +
        `types [${this.events.map((e) => e.type).join(',')}]` +
        (this.violations.length ? `; violations: ${this.violations.join('; ')}` : '') +
        (this.errors.length ? `; errors: ${JSON.stringify(this.errors)}` : '') +
        (this.failure ? `; failed: ${String((this.failure as Error)?.message ?? JSON.stringify(this.failure))}` : '');
      const check = () => {
        if (this.violations.length) return finish(new Error(`gap or duplicate while waiting for ${describe()}`));
        if (condition(this.events)) return finish();
        if (this.errors.length) return finish(new Error(`error while waiting for ${describe()}`));
        if (this.ended) return finish(new Error(`stream ended while waiting for ${describe()}`));
      };
      const timer = setTimeout(() => finish(new Error(`timed out after ${timeoutMs} ms waiting for ${describe()}`)), timeoutMs);
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve([...this.events]);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** Waits until the last event received has this seq (and so, checked on arrival, every one before it). */
  untilSeq(seq: number, timeoutMs = DEFAULT_WAIT_MS): Promise<JobEventMessage[]> {
    return this.until((events) => (events.at(-1)?.seq ?? this.afterSeq) >= seq, `seq ${seq}`, timeoutMs);
  }

  /** Waits for the first error the subscription answers with (e.g. NOT_FOUND). */
  async untilError(timeoutMs = DEFAULT_WAIT_MS): Promise<{ message: string; extensions?: Record<string, unknown> }> {
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (this.errors.length) return finish();
        if (this.ended) return finish(new Error(`${this.label} ended without an error; events: ${JSON.stringify(this.events)}; failure: ${String(this.failure)}`));
      };
      const timer = setTimeout(() => finish(new Error(`${this.label}: no error within ${timeoutMs} ms`)), timeoutMs);
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve();
      };
      this.waiters.add(check);
      check();
    });
    return this.errors[0]!;
  }

  /** Errors (closing a socket, a transport failure) as the stream ends. */
  get failed(): unknown {
    return this.failure;
  }

  async stop(): Promise<void> {
    await this.close();
    await this.done;
  }
}

/** jobEvents over graphql-ws. The stream stops after the file's tests unless stopped before. */
export function subscribeWs(client: Client, jobId: string, afterSeq?: number, label?: string): EventStream {
  const iterator = client.iterate<{ jobEvents: JobEventMessage }>({
    query: JOB_EVENTS,
    variables: afterSeq === undefined ? { jobId } : { jobId, afterSeq },
  });
  const stream = new EventStream(iterator as AsyncIterable<ExecutionResultLike>, afterSeq ?? 0, async () => {
    await iterator.return?.();
  }, label);
  onTestFinished(() => stream.stop());
  return stream;
}

/**
 * A GraphQL subscription over server-sent events (Yoga's "distinct connections" mode): POST with
 * Accept: text/event-stream and a JSON body, or GET with query and variables in the URL; then
 * `event: next` / `data: {json}` messages until `event: complete`.
 */
export async function* sseResults(
  graphqlUrl: string,
  token: string | undefined,
  query: string,
  variables: Record<string, unknown>,
  signal: AbortSignal,
  method: 'GET' | 'POST' = 'POST',
): AsyncGenerator<ExecutionResultLike> {
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  let res: Response;
  if (method === 'POST') {
    res = await fetch(graphqlUrl, {
      method,
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
      signal,
    });
  } else {
    const url = new URL(graphqlUrl);
    url.searchParams.set('query', query);
    url.searchParams.set('variables', JSON.stringify(variables));
    res = await fetch(url, { headers, signal });
  }
  if (!res.ok || !res.body) throw new Error(`SSE ${method} answered ${res.status}: ${await res.text()}`);
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    throw new Error(`SSE ${method} answered ${res.headers.get('content-type')}: ${await res.text()}`);
  }
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let match: RegExpExecArray | null;
      while ((match = /\r?\n\r?\n/.exec(buffer)) !== null) {
        const block = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(':')) continue; // a keep-alive comment
          const colon = line.indexOf(':');
          const field = colon === -1 ? line : line.slice(0, colon);
          const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
        if (event === 'complete') return;
        if (data.length) yield JSON.parse(data.join('\n')) as ExecutionResultLike;
      }
    }
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  }
}

/** jobEvents over SSE. The stream stops when the test ends unless stopped before. */
export function subscribeSse(
  graphqlUrl: string,
  token: string | undefined,
  jobId: string,
  opts: { afterSeq?: number; method?: 'GET' | 'POST'; label?: string } = {},
): EventStream {
  const abort = new AbortController();
  const variables = opts.afterSeq === undefined ? { jobId } : { jobId, afterSeq: opts.afterSeq };
  const stream = new EventStream(
    sseResults(graphqlUrl, token, JOB_EVENTS, variables, abort.signal, opts.method),
    opts.afterSeq ?? 0,
    () => abort.abort(),
    opts.label ?? `sse ${opts.method ?? 'POST'}`,
  );
  onTestFinished(() => stream.stop());
  return stream;
}

/** A graphql-ws client made inside a test, disposed when the test ends. */
export function wsClientForTest(graphqlUrl: string, token: string): Client {
  const client = newWsClient(graphqlUrl, token);
  onTestFinished(() => client.dispose());
  return client;
}

/** Polls a condition on observable state (the database's view, a counter) until it holds; fails after the timeout. */
export async function waitFor<T>(probe: () => Promise<T | undefined | false>, what: string, timeoutMs = DEFAULT_WAIT_MS): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
