// The `onejob` command: `onejob token create --owner NAME [--role operator]` prints one token.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { systemClock } from './clock.ts';
import { loadConfig } from './config.ts';
import { createToken } from './core/auth.ts';
import { openDatabase } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { createPool, type Pool } from './db/pool.ts';
import { createLogger } from './log.ts';
import { CertificationError, certifyProvider } from './providers/certification.ts';
import { ProviderRegistry } from './providers/registry.ts';
import { parseLog } from './replay/messages.ts';
import { replayLog } from './replay/replay.ts';
import { snapshot } from './replay/snapshot.ts';

const USAGE = `usage:
  onejob token create --owner NAME [--role owner|operator]
      Prints one bearer token for the owner (created if new) on stdout, nothing else.
  onejob contract run --provider NAME [--operation OP]
      Runs the operations' fixtures through the provider (ONEJOB_CONFIG names its configuration),
      checks every output against the contract, and records the certification. Exit 0 when all pass.
  onejob replay FILE [--url http://127.0.0.1:4000] [--tokens .onejob/replay-tokens.json]
      Plays a recorded message log (JSON lines: createJob, reportAttemptResult, cancelAttempt,
      cancelJob, webhook) against the running service, in order, and prints what it answered.
  onejob snapshot
      Prints a canonical dump of the whole state, to compare two states byte for byte.
All use DATABASE_URL, or without it the embedded database of the working directory.`;

async function replayCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { url: { type: 'string', default: 'http://127.0.0.1:4000' }, tokens: { type: 'string', default: '.onejob/replay-tokens.json' } },
  });
  const file = positionals[0];
  if (!file) {
    process.stderr.write(`replay needs a FILE\n${USAGE}\n`);
    return 2;
  }
  const messages = parseLog(readFileSync(file, 'utf8'));
  const config = loadConfig();
  return withDatabase(async (pool) => {
    const summary = await replayLog(messages, { url: values.url!.replace(/\/+$/, ''), db: pool, config, tokensFile: values.tokens! });
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  });
}

async function snapshotCommand(): Promise<number> {
  return withDatabase(async (pool) => {
    process.stdout.write(await snapshot(pool));
    return 0;
  });
}

/** Opens the database, applies migrations, runs fn, and closes everything whatever happens. */
async function withDatabase<T>(fn: (pool: Pool) => Promise<T>): Promise<T> {
  const db = await openDatabase();
  const pool = createPool(db.url, 2);
  try {
    await migrate(pool);
    return await fn(pool);
  } finally {
    await pool.end();
    await db.stop();
  }
}

async function contractRun(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { provider: { type: 'string' }, operation: { type: 'string', multiple: true } } });
  if (!values.provider) {
    process.stderr.write(`--provider NAME is required\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig();
  return withDatabase(async (pool) => {
    const core = { pool, clock: systemClock, config, providers: new ProviderRegistry(config), log: createLogger('warn') };
    let records;
    try {
      records = await certifyProvider(core, values.provider!, values.operation);
    } catch (err) {
      if (!(err instanceof CertificationError)) throw err;
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    for (const r of records) {
      const verdict = r.passed ? 'PASSED' : 'FAILED';
      process.stdout.write(
        `${r.provider} ${r.model} ${r.operation} (prompt ${r.templateVersion}, schema ${r.outputSchemaHash.slice(0, 12)}): ` +
          `${verdict} ${r.fixtures - r.failures.length}/${r.fixtures} fixtures, ${r.promptTokens} prompt tokens\n`,
      );
      for (const f of r.failures) process.stdout.write(`  ${f.fixture}: ${f.reason}\n`);
    }
    return records.every((r) => r.passed) ? 0 : 1;
  });
}

async function tokenCreate(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { owner: { type: 'string' }, role: { type: 'string', default: 'owner' } } });
  const owner = values.owner?.trim();
  if (!owner || owner.length > 100) {
    process.stderr.write(`--owner NAME is required (1..100 characters)\n${USAGE}\n`);
    return 2;
  }
  if (values.role !== 'owner' && values.role !== 'operator') {
    process.stderr.write(`--role must be owner or operator, not ${values.role}\n`);
    return 2;
  }
  const role = values.role;
  return withDatabase(async (pool) => {
    const { token } = await createToken(pool, owner, role);
    process.stdout.write(`${token}\n`);
    return 0;
  });
}

async function run(argv: string[]): Promise<number> {
  const [group, command, ...rest] = argv;
  if (group === 'token' && command === 'create') return tokenCreate(rest);
  if (group === 'contract' && command === 'run') return contractRun(rest);
  if (group === 'replay') return replayCommand(argv.slice(1));
  if (group === 'snapshot') return snapshotCommand();
  process.stderr.write(`${USAGE}\n`);
  return group === undefined || group === '--help' || group === 'help' ? 0 : 2;
}

// exitCode, not exit(): exiting at once would cut off stdout still being written to a pipe (a
// snapshot is megabytes). Everything is closed by then, so the process ends by itself.
run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`onejob: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
