// `npm start`: reads the environment and configuration, opens the database (DATABASE_URL or the
// embedded Postgres), starts one onejob instance, and stops it all cleanly on SIGINT/SIGTERM.
import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { createToken } from './core/auth.ts';
import { EmbeddedDatabaseError } from './db/embedded.ts';
import { openDatabase } from './db/database.ts';
import { countTokens } from './db/owners.ts';
import { createLogger } from './log.ts';

const log = createLogger();

async function main(): Promise<void> {
  const config = loadConfig();
  const db = await openDatabase((line) => log.info(line));
  const app = buildApp({ config, databaseUrl: db.url, log });
  const port = Number(process.env.PORT ?? 4000);
  const url = await app.start(port, process.env.HOST ?? '127.0.0.1');
  log.info({ url: `${url}/graphql`, embeddedDatabase: db.embedded }, 'onejob is serving');

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
