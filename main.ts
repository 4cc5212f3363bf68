// `npm start`: reads the environment and configuration, opens the database (DATABASE_URL or the
// embedded Postgres), starts one onejob instance, and stops it all cleanly on SIGINT/SIGTERM.
import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { createToken } from './core/auth.ts';
import { EmbeddedDatabaseError } from './db/embedded.ts';
import { openDatabase } from './db/database.ts';
import { countTokens } from './db/owners.ts';
import { createLogger } from './log.ts';
import { certifyProvider } from './providers/certification.ts';
import type { Core } from './core/core.ts';
import { OPERATIONS } from './providers/operations/index.ts';

const log = createLogger();

async function main(): Promise<void> {
  const config = loadConfig();
  const db = await openDatabase((line) => log.info(line));
  const app = buildApp({ config, databaseUrl: db.url, log });
  const port = Number(process.env.PORT ?? 4000);
  const url = await app.start(port, process.env.HOST ?? '127.0.0.1');
  log.info({ url: `${url}/graphql`, embeddedDatabase: db.embedded }, 'onejob is serving');

  void certifySimulatedProviders(app.core).catch((err) => log.error({ err }, 'certifying the simulated providers failed'));
  if (db.embedded && (await countTokens(app.core.pool)) === 0) await printDemoTokens(app.core.pool, url);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    await app.stop().catch((err) => log.error({ err }, 'stopping the app failed'));
    await db.stop().catch((err) => log.error({ err }, 'stopping the embedded database failed'));
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/**
 * Simulated providers are local and free to run, so their fixtures are run at start (in the
 * background) when they have no certification under the current prompt and schema yet: a sim that
 * behaves earns one, a sim that breaks contracts is recorded failing (and automatic failover to it stays
 * blocked). Real providers are certified only on request (`onejob contract run`): that spends money.
 */
async function certifySimulatedProviders(core: Core): Promise<void> {
  for (const name of core.providers.names()) {
    if (core.providers.get(name)?.kind !== 'sim') continue;
    const missing: string[] = [];
    for (const op of OPERATIONS.keys()) {
      if (!(await core.providers.currentCertification(core.pool, name, op))) missing.push(op);
    }
    if (missing.length === 0) continue;
    for (const c of await certifyProvider(core, name, missing)) {
      log.info({ provider: name, operation: c.operation, passed: c.passed, failures: c.failures.length }, 'certified a simulated provider');
    }
  }
}

async function printDemoTokens(pool: Parameters<typeof createToken>[0], url: string): Promise<void> {
  const owner = await createToken(pool, 'demo', 'owner');
  const operator = await createToken(pool, 'demo-operator', 'operator');
  process.stdout.write(`
First run on the embedded database: a demo owner and a demo operator were created.
Their tokens are shown once only (only their hashes are stored):

  owner    (demo):          ${owner.token}
  operator (demo-operator): ${operator.token}

Try it:

  curl -s ${url}/graphql -H 'content-type: application/json' \\
    -H 'authorization: Bearer ${owner.token}' \\
    -d '{"query":"mutation { createJob(input: {idempotencyKey: \\"order-42\\", operation: \\"summarize\\", provider: \\"primary\\", fallbackProviders: [\\"backup\\"], input: {text: \\"A long text to summarize.\\"}}) { replayed job { id status attempts { id number state } } } }"}'

The fallback demo: sim-slow never answers; after its 2 s deadline the attempt is UNKNOWN, reconciliation
learns that sim-slow never processed it (FAILED), and the certified sim-fast takes over by itself:

  curl -s ${url}/graphql -H 'content-type: application/json' \\
    -H 'authorization: Bearer ${owner.token}' \\
    -d '{"query":"mutation { createJob(input: {idempotencyKey: \\"demo-fallback\\", operation: \\"summarize\\", provider: \\"sim-slow\\", fallbackProviders: [\\"sim-fast\\"], input: {text: \\"The primary model is down today. The fallback answers instead, and only because it passed its contract tests.\\"}}) { job { id status } } }"}'

  then, a few seconds later, ask for { job(id: \\"JOB_ID\\") { status result attempts { provider state error } } }

More tokens: npx onejob token create --owner NAME [--role operator]

`);
}

main().catch((err) => {
  if (err instanceof ConfigError || err instanceof EmbeddedDatabaseError) {
    process.stderr.write(`${err.message}\n`);
  } else {
    log.fatal({ err }, 'onejob failed to start');
  }
  process.exit(1);
});
