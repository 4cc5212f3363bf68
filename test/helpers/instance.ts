// Real onejob instances on port 0 against a test database, and the tokens to call them with.
import { afterAll } from 'vitest';
import { buildApp, type App, type AppOptions } from '../../app.ts';
import { Config, DEFAULT_CONFIG } from '../../config.ts';
import { createToken } from '../../core/auth.ts';
import type { Caller } from '../../core/caller.ts';
import type { Role } from '../../db/owners.ts';
import type { Queryable } from '../../db/pool.ts';
import { createLogger } from '../../log.ts';

export const TEST_CONFIG: Config = Config.parse({
  providers: {
    primary: { kind: 'manual', timeoutMs: 30_000 },
    backup: { kind: 'manual', timeoutMs: 30_000 },
    spare: { kind: 'manual', timeoutMs: 30_000 },
  },
});

export interface Instance {
  app: App;
  url: string;
  graphqlUrl: string;
  stop(): Promise<void>;
}

/** Starts an instance; it is stopped after the file's tests unless stopped before. */
export async function startInstance(
  databaseUrl: string,
  opts: Pick<AppOptions, 'clock' | 'sweepDeadlines' | 'dispatchAttempts' | 'expireKeys' | 'callbackDelivery'> & { config?: Config } = {},
): Promise<Instance> {
  const app = buildApp({
    config: opts.config ?? TEST_CONFIG ?? DEFAULT_CONFIG,
    databaseUrl,
    clock: opts.clock,
    sweepDeadlines: opts.sweepDeadlines,
    dispatchAttempts: opts.dispatchAttempts,
    expireKeys: opts.expireKeys,
    callbackDelivery: opts.callbackDelivery,
    log: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
  });
  const url = await app.start(0);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await app.stop();
  };
  afterAll(stop);
  return { app, url, graphqlUrl: `${url}/graphql`, stop };
}

export interface TestToken {
  token: string;
  caller: Caller;
}

export function makeToken(q: Queryable, owner: string, role: Role = 'owner'): Promise<TestToken> {
  return createToken(q, owner, role);
}
