// A lean GraphQL-over-HTTP client on node:http, so the load generator costs as little CPU as it can
// (measured here: fetch costs about twice the client CPU per createJob request).
import http from 'node:http';

export interface GraphQLReply<T = any> {
  status: number;
  data?: T;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
}

export class GraphQLHttpClient {
  private readonly target: URL;
  constructor(
    graphqlUrl: string,
    private readonly token: string,
    readonly agent: http.Agent,
    private readonly timeoutMs = 30_000,
  ) {
    this.target = new URL(graphqlUrl);
  }

  post<T = any>(query: string, variables?: Record<string, unknown>): Promise<GraphQLReply<T>> {
    const body = JSON.stringify({ query, variables });
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          agent: this.agent,
          host: this.target.hostname,
          port: this.target.port,
          path: this.target.pathname,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            accept: 'application/graphql-response+json, application/json',
            authorization: `Bearer ${this.token}`,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            try {
              const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
              resolve({ status: res.statusCode ?? 0, data: parsed.data, errors: parsed.errors });
            } catch (err) {
              reject(new Error(`HTTP ${res.statusCode}: unparsable body (${(err as Error).message})`));
            }
          });
          res.on('error', reject);
        },
      );
      req.setTimeout(this.timeoutMs, () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }
}

/** Data of a request that must succeed. */
export function dataOf<T>(reply: GraphQLReply<T>, what: string): T {
  if (reply.errors?.length || !reply.data) throw new Error(`${what} failed (HTTP ${reply.status}): ${JSON.stringify(reply.errors)}`);
  return reply.data;
}

export interface ClosedLoopResult {
  ok: number;
  failed: number;
  firstError?: string;
  latenciesMs: number[];
  wallS: number;
}

/**
 * `concurrency` callers, each sending its next request as soon as the last one answered, until
 * `durationMs` has passed (requests in flight then are awaited and counted).
 */
export async function closedLoop(concurrency: number, durationMs: number, op: () => Promise<void>): Promise<ClosedLoopResult> {
  const latenciesMs: number[] = [];
  let failed = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const until = t0 + durationMs;
  const worker = async () => {
    while (performance.now() < until) {
      const start = performance.now();
      try {
        await op();
        latenciesMs.push(performance.now() - start);
      } catch (err) {
        failed++;
        firstError ??= (err as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok: latenciesMs.length, failed, firstError, latenciesMs, wallS: (performance.now() - t0) / 1000 };
}
