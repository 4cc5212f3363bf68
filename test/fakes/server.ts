// The HTTP plumbing every fake shares: a real node:http server on 127.0.0.1 port 0 (a real socket, so a
// reset or a hang is what the adapter's own fetch sees in production), a record of every request, and
// the transport behaviours (status, delay, hang, reset). Provider files only route and render bodies.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Behaviour, BehaviourKind, ContentBehaviour, Endpoint, TransportBehaviour } from './script.ts';

/** One request as the fake received it, and what it did with it. */
export interface RecordedRequest {
  /** 1, 2, 3… in arrival order. */
  seq: number;
  method: string;
  /** The path without the query string, e.g. "/v1/chat/completions". */
  path: string;
  /** The endpoint it was routed to; undefined for a path the fake does not serve (answered 404). */
  endpoint: Endpoint | undefined;
  /** Lower-case header names, as node:http gives them. */
  headers: http.IncomingHttpHeaders;
  /** The body parsed as JSON; the raw text when it is not JSON; undefined when empty. */
  body: unknown;
  /** The `Idempotency-Key` header, the key to count requests per attempt by. */
  idempotencyKey: string | undefined;
  /**
   * What the fake did: the behaviour's kind (outer one for a delay), or "unauthorized" / "badRequest" /
   * "notFound" when it refused before taking a scripted behaviour (those consume no script entry).
   */
  answer: BehaviourKind | 'unauthorized' | 'badRequest' | 'notFound' | undefined;
  /** The HTTP status sent, once sent; undefined for a hang, a reset, or a client gone first. */
  status: number | undefined;
  /** The provider's id for what this request created or read (chatcmpl-…, resp_…, msg_…). */
  providerId: string | undefined;
  /** The client closed the connection before any answer (an abort or a client timeout). */
  closedByClient: boolean;
  /** The fake reset the connection (resetAfterReceive). */
  reset: boolean;
}

/** One request in flight: the record plus what is needed to answer it. */
export interface Exchange {
  readonly record: RecordedRequest;
  readonly req: http.IncomingMessage;
  readonly res: http.ServerResponse;
}

export interface FakeServer {
  /** http://127.0.0.1:PORT */
  origin: string;
  /** Every request so far, oldest first; the array is live. */
  requests: RecordedRequest[];
  /** Resolves when `predicate` holds (checked at every request, answer and close), or rejects after timeoutMs. */
  until(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  /** The first recorded request matching `predicate` (any, when omitted), waiting for it if needed. */
  waitForRequest(predicate?: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>;
  /** Tells waiters that a record changed. */
  notify(): void;
  /** Waits `ms`; resolves early (and reports false) when the fake stops, so nothing outlives stop(). */
  sleep(ms: number): Promise<boolean>;
  /** Closes the server and destroys every open connection, hung ones included. */
  stop(): Promise<void>;
}

export const newId = (prefix: string) => `${prefix}${randomBytes(12).toString('hex')}`;

export async function startFakeServer(opts: {
  route(method: string, path: string): Endpoint | undefined;
  handle(ex: Exchange): Promise<void>;
}): Promise<FakeServer> {
  const requests: RecordedRequest[] = [];
  const waiters = new Set<() => void>();
  const sleepers = new Set<() => void>();
  let stopped = false;

  const notify = () => {
    for (const w of [...waiters]) w();
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const path = (req.url ?? '/').split('?')[0]!;
      const key = req.headers['idempotency-key'];
      const record: RecordedRequest = {
        seq: requests.length + 1,
        method: req.method ?? 'GET',
        path,
        endpoint: opts.route(req.method ?? 'GET', path),
        headers: req.headers,
        body: parseBody(raw),
        idempotencyKey: Array.isArray(key) ? key[0] : key,
        answer: undefined,
        status: undefined,
        providerId: undefined,
        closedByClient: false,
        reset: false,
      };
      requests.push(record);
      res.on('finish', notify);
      res.on('close', () => {
        if (!res.writableEnded && !record.reset && !stopped) {
          record.closedByClient = true;
          notify();
        }
      });
      notify();
      opts.handle({ record, req, res }).catch((error: unknown) => {
        // A bug in the fake must fail loudly, not look like a provider fault the adapter handles.
        console.error('fake provider handler failed', error);
        if (!res.headersSent) sendJson({ record, req, res }, 500, { fakeHandlerError: String(error) });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const until = (predicate: () => boolean, timeoutMs = 5_000) =>
    new Promise<void>((resolve, reject) => {
      if (predicate()) return resolve();
      const check = () => {
        if (!predicate()) return;
        done();
        resolve();
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`fake provider: condition not met within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
    });

  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    until,
    async waitForRequest(predicate = () => true, timeoutMs) {
      await until(() => requests.some(predicate), timeoutMs);
      return requests.find(predicate)!;
    },
    notify,
    sleep: (ms) =>
      new Promise<boolean>((resolve) => {
        if (stopped) return resolve(false);
        const wake = (completed: boolean) => {
          clearTimeout(timer);
          sleepers.delete(onStop);
          resolve(completed);
        };
        const onStop = () => wake(false);
        const timer = setTimeout(() => wake(true), ms);
        sleepers.add(onStop);
      }),
    async stop() {
      stopped = true;
      for (const s of [...sleepers]) s();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

function parseBody(raw: string): unknown {
  if (raw === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** Whether the answer can still be written (the client may have aborted, or the fake stopped). */
export const canAnswer = (ex: Exchange) => !ex.res.destroyed && !ex.res.writableEnded;

export function sendJson(ex: Exchange, status: number, body: unknown, headers: Record<string, string> = {}): void {
  ex.record.status = status;
  if (!canAnswer(ex)) return;
  ex.res.writeHead(status, { 'content-type': 'application/json', ...headers });
  ex.res.end(JSON.stringify(body));
}

export function sendRaw(ex: Exchange, status: number, body: string, headers: Record<string, string> = {}): void {
  ex.record.status = status;
  if (!canAnswer(ex)) return;
  ex.res.writeHead(status, { 'content-type': 'text/html', ...headers });
  ex.res.end(body);
}

/** The Retry-After header a status behaviour asks for: seconds, 429 defaulting to 1. */
export function retryAfterHeader(b: Extract<TransportBehaviour, { kind: 'status' }>): Record<string, string> {
  const seconds = b.retryAfterSeconds === undefined ? (b.status === 429 ? 1 : null) : b.retryAfterSeconds;
  return seconds === null ? {} : { 'retry-after': String(seconds) };
}

/**
 * Carries out a behaviour on one exchange: the transport kinds here, the rest by the provider's
 * callbacks (`error` renders its error body for a status; `content` renders a 200 answer).
 */
export async function perform(
  server: FakeServer,
  ex: Exchange,
  behaviour: Behaviour,
  on: { error(b: Extract<TransportBehaviour, { kind: 'status' }>): void; content(b: ContentBehaviour): void },
): Promise<void> {
  ex.record.answer ??= behaviour.kind;
  switch (behaviour.kind) {
    case 'hang':
      // Nothing to do: the socket stays open until the client aborts (closedByClient) or stop().
      server.notify();
      return;
    case 'resetAfterReceive':
      ex.record.reset = true;
      ex.req.socket.resetAndDestroy();
      server.notify();
      return;
    case 'delay':
      server.notify();
      if (!(await server.sleep(behaviour.ms)) || !canAnswer(ex)) return;
      return perform(server, ex, behaviour.then ?? { kind: 'ok' }, on);
    case 'status':
      on.error(behaviour);
      break;
    default:
      on.content(behaviour);
  }
  server.notify();
}
