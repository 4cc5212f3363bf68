// A onejob instance in its own process, so that a test can kill it outright (SIGKILL) mid-call.
// Reads DATABASE_URL and ONEJOB_CONFIG; prints {"url": …} on stdout once it serves.
import { buildApp } from '../../app.ts';
import { loadConfig } from '../../config.ts';
import { createLogger } from '../../log.ts';

const app = buildApp({ config: loadConfig(), databaseUrl: process.env.DATABASE_URL!, log: createLogger('silent') });
const url = await app.start(0);
process.stdout.write(`${JSON.stringify({ url })}\n`);
