import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded.ts';

export interface DatabaseLocation {
  url: string;
  /** For creating and dropping whole databases (tests, benches). */
  adminUrl: string;
  embedded: boolean;
  stop(): Promise<void>;
}

/**
 * DATABASE_URL when set; otherwise the embedded Postgres of the working directory (.onejob/).
 *
 * `throwaway` (tests, benches): a cluster of this process's own under .onejob/throwaway/, deleted when
 * stopped. Hazard it avoids: a process that joins a cluster another process started loses it when that
 * process stops — a test run must not take the database away from a running `npm start`, nor the reverse.
 */
export async function openDatabase(log?: (line: string) => void, options: { throwaway?: boolean } = {}): Promise<DatabaseLocation> {
  const url = process.env.DATABASE_URL;
  if (url) return { url, adminUrl: url, embedded: false, stop: async () => {} };
  if (!options.throwaway) {
    const db: EmbeddedDatabase = await startEmbeddedPostgres({ log });
    return { ...db, embedded: true };
  }
  const dir = path.resolve('.onejob', 'throwaway', `${process.pid}-${randomBytes(4).toString('hex')}`);
  const db = await startEmbeddedPostgres({ dir, log });
  return {
    ...db,
    embedded: true,
    async stop() {
      await db.stop();
      removeCluster(dir);
    },
  };
}

/** Deletes a cluster's state directory and its data, which may live elsewhere behind the pgdata link. */
function removeCluster(dir: string): void {
  const pgdata = path.join(dir, 'pgdata');
  let data: string | undefined;
  try {
    data = fs.realpathSync(pgdata);
  } catch {
    data = undefined;
  }
  if (data && data !== pgdata) fs.rmSync(path.dirname(data), { recursive: true, force: true });
  fs.rmSync(dir, { recursive: true, force: true });
}
