// buildApp wires one onejob instance: Yoga (HTTP and SSE) and graphql-ws on one HTTP server, the
// deadline sweep and the event hub. main.ts only starts it; tests start several on one database.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { usePrometheus } from '@graphql-yoga/plugin-prometheus';
import type { GraphQLError } from 'graphql';
import { createYoga, type YogaInitialContext } from 'graphql-yoga';
import { useServer } from 'graphql-ws/use/ws';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { WebSocketServer } from 'ws';
import { systemClock, type Clock } from './clock.ts';
import type { Config } from './config.ts';
import { Authenticator, bearerToken } from './core/auth.ts';
import type { Core } from './core/core.ts';
import { startCallbackDelivery, type CallbackDeliveryTuning } from './core/callbackDelivery.ts';
import { startDeadlineSweeper } from './core/deadlines.ts';
import type { Periodic } from './core/periodic.ts';
import { DEFAULT_KEY_EXPIRY, keyExpiryMetrics, startKeyExpirySweeper } from './core/keyExpiry.ts';
import { DomainError } from './core/errors.ts';
import { JobEventHub } from './core/eventHub.ts';
import { migrate } from './db/migrate.ts';
import { createPool, type Pool } from './db/pool.ts';
import { createMaskError, useContractErrorCodes } from './errorMasking.ts';
import { createLogger } from './log.ts';
import { startReconciler } from './providers/reconciler.ts';
import { ProviderRegistry } from './providers/registry.ts';
import { AttemptRunner } from './providers/runner.ts';
import type { GraphQLContext } from './schema/context.ts';
import { schema } from './schema/index.ts';
import { useResponseHeaders } from './schema/responseHeaders.ts';
import { createInboundWebhookHandler, isInboundWebhookPath } from './webhooks/inbound.ts';

/** Bodies above this are refused with 413 before they are parsed. */
export const MAX_REQUEST_BODY_BYTES = 1024 * 1024;
const HEALTH_QUERY_TIMEOUT_MS = 2_000;

export interface AppOptions {
  config: Config;
  databaseUrl: string;
  clock?: Clock;
  log?: Logger;
  /** Run the deadline sweep (default true); tests of the sweep itself drive it by hand. */
  sweepDeadlines?: boolean;
  /** Run the attempt runner and the reconciler (default true). */
  dispatchAttempts?: boolean;
  /** Run the sweep that deletes expired deduplication keys (default true). */
  expireKeys?: boolean;
  /** Run the callback delivery worker (default true). */
  deliverCallbacks?: boolean;
  /** Its poll interval, request timeout and backoff (tests shorten the backoff). */
  callbackDelivery?: Partial<CallbackDeliveryTuning>;
}

export interface App {
  core: Core;
  hub: JobEventHub;
  runner: AttemptRunner;
  /** Listens on 127.0.0.1:port (0: any free port); answers the base URL. */
  start(port?: number, host?: string): Promise<string>;
  stop(): Promise<void>;
  url: string;
}

export function buildApp(options: AppOptions): App {
  const log = options.log ?? createLogger();
  const pool: Pool = createPool(options.databaseUrl);
  const core: Core = {
    pool,
    clock: options.clock ?? systemClock,
    config: options.config,
    providers: new ProviderRegistry(options.config),
    log,
  };
  const hub = new JobEventHub(pool, options.databaseUrl, log);
  const runner = new AttemptRunner(core, options.databaseUrl, `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`);
  const authenticator = new Authenticator(pool);
  const maskError = createMaskError(log);
  // One registry per app: prom-client's global one refuses a second app in the same process (tests).
  const metricsRegistry = new Registry();
  const expiryMetrics = keyExpiryMetrics(metricsRegistry);
  const inboundWebhooks = createInboundWebhookHandler(core);

  async function contextFor(authorization: unknown, request?: Request): Promise<GraphQLContext> {
    const caller = await authenticator.authenticate(typeof authorization === 'string' ? bearerToken(authorization) : undefined);
    if (!caller) {
      throw new DomainError('UNAUTHENTICATED', 'Send a valid token: "Authorization: Bearer TOKEN" (WebSocket: connectionParams.authorization).');
    }
    return { caller, core, hub, request };
  }

  const yoga = createYoga<Record<string, unknown>, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    maxRequestBodySize: MAX_REQUEST_BODY_BYTES,
    maskedErrors: { maskError: (error) => maskError(error) },
    logging: {
      debug: (...args) => log.debug(args.map(String).join(' ')),
      info: (...args) => log.info(args.map(String).join(' ')),
      warn: (...args) => log.warn(args.map(String).join(' ')),
      error: (...args) => log.debug({ yoga: args.map(String).join(' ') }, 'request refused or failed'),
    },
    context: async (initial: YogaInitialContext & { connectionParams?: Record<string, unknown> }) =>
      contextFor(initial.request?.headers.get('authorization') ?? initial.connectionParams?.authorization, initial.request),
    plugins: [
      EnvelopArmorPlugin({
        maxDepth: { n: 8 },
        costLimit: { maxCost: 5000 },
        maxAliases: { n: 15 },
        maxTokens: { n: 2000 },
        maxDirectives: { n: 20 },
      }),
      usePrometheus({ registry: metricsRegistry, endpoint: '/metrics' }),
      useContractErrorCodes(maskError),
      useResponseHeaders(),
    ],
  });

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/healthz') return void healthz(pool, res);
    // A body refused part-way (413 on a chunked upload) is left unread, and the connection would stay
    // open but stuck: the client's next request on it fails after the keep-alive timeout. Close it.
    const socket = req.socket;
    res.once('finish', () => {
      if (!req.complete && !socket.destroyed) socket.end();
    });
    if (isInboundWebhookPath(req.url)) return void inboundWebhooks(req, res);
    return yoga(req, res);
  });

  const wsServer = new WebSocketServer({ server, path: yoga.graphqlEndpoint });
  const wsCleanup = useServer<Record<string, unknown>, { caller?: unknown }>(
    {
      // The socket is authenticated once, at connection: a bad token closes it with 4403.
      onConnect: async (ctx) => {
        try {
          await contextFor(ctx.connectionParams?.authorization);
          return true;
        } catch {
          return false;
        }
      },
      execute: (args) => (args.rootValue as { execute: (a: unknown) => unknown }).execute(args) as never,
      subscribe: (args) => (args.rootValue as { subscribe: (a: unknown) => unknown }).subscribe(args) as never,
      onSubscribe: async (ctx, _id, payload) => {
        const { schema: s, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params: payload,
        });
        let document;
        let errors: readonly GraphQLError[];
        try {
          document = parse(payload.query);
          errors = validate(s, document);
        } catch (err) {
          // A syntax error or an armor limit refuses this one operation; thrown, it would close the whole socket (4500).
          return [maskError(err) as GraphQLError];
        }
        if (errors.length) return errors;
        const args = {
          schema: s,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        return args;
      },
    },
    wsServer,
  );

  let sweeper: Periodic | undefined;
  let reconciler: Periodic | undefined;
  let callbackDelivery: Periodic | undefined;
  let keyExpiry: Periodic | undefined;
  let dispatching = false;
  let url = '';

  return {
    core,
    hub,
    runner,
    get url() {
      return url;
    },
    async start(port = 0, host = '127.0.0.1') {
      await migrate(pool);
      await hub.start();
      if (options.sweepDeadlines !== false) sweeper = startDeadlineSweeper(core);
      if (options.deliverCallbacks !== false) callbackDelivery = startCallbackDelivery(core, options.callbackDelivery);
      if (options.expireKeys !== false) {
        const { sweepIntervalSeconds, batchSize } = options.config.expiry;
        keyExpiry = startKeyExpirySweeper(core, { ...DEFAULT_KEY_EXPIRY, intervalMs: sweepIntervalSeconds * 1000, batchSize }, expiryMetrics);
      }
      if (options.dispatchAttempts !== false) {
        await runner.start();
        reconciler = startReconciler(core);
        dispatching = true;
      }
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => resolve());
      });
      const address = server.address() as AddressInfo;
      url = `http://${host}:${address.port}`;
      return url;
    },
    async stop() {
      await keyExpiry?.stop();
      await callbackDelivery?.stop();
      await reconciler?.stop();
      if (dispatching) await runner.stop();
      await sweeper?.stop();
      await wsCleanup.dispose();
      wsServer.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await hub.stop();
      await pool.end();
    },
  };
}

async function healthz(pool: Pool, res: ServerResponse): Promise<void> {
  let ok = false;
  try {
    await Promise.race([
      pool.query('SELECT 1'),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), HEALTH_QUERY_TIMEOUT_MS).unref()),
    ]);
    ok = true;
  } catch {
    ok = false;
  }
  res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ status: ok ? 'ok' : 'database unavailable' }));
}
