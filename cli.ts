// The `onejob` command: `onejob token create --owner NAME [--role operator]` prints one token.
import { parseArgs } from 'node:util';
import { createToken } from './core/auth.ts';
import { openDatabase } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { createPool } from './db/pool.ts';

const USAGE = `usage:
  onejob token create --owner NAME [--role owner|operator]
      Prints one bearer token for the owner (created if new) on stdout, nothing else.
      Uses DATABASE_URL, or without it the embedded database of the working directory.`;

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
  const db = await openDatabase();
  const pool = createPool(db.url, 2);
  try {
    await migrate(pool);
    const { token } = await createToken(pool, owner, values.role);
    process.stdout.write(`${token}\n`);
    return 0;
  } finally {
    await pool.end();
    await db.stop();
  }
}

async function run(argv: string[]): Promise<number> {
  const [group, command, ...rest] = argv;
  if (group === 'token' && command === 'create') return tokenCreate(rest);
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
