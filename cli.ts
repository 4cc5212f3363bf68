// The `onejob` command: `onejob token create --owner NAME [--role operator]` prints one token.
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

const USAGE = `usage:
  onejob token create --owner NAME [--role owner|operator]
      Prints one bearer token for the owner (created if new) on stdout, nothing else.
  onejob contract run --provider NAME [--operation OP]
      Runs the operations' fixtures through the provider (ONEJOB_CONFIG names its configuration),
      checks every output against the contract, and records the certification. Exit 0 when all pass.
Both use DATABASE_URL, or without it the embedded database of the working directory.`;

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
  process.stderr.write(`${USAGE}\n`);
  return group === undefined || group === '--help' || group === 'help' ? 0 : 2;
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`onejob: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
