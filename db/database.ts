import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded.ts';

export interface DatabaseLocation {
  url: string;
  /** For creating and dropping whole databases (tests, benches). */
  adminUrl: string;
  embedded: boolean;
  stop(): Promise<void>;
}

/** DATABASE_URL when set; otherwise the embedded Postgres of the working directory. */
export async function openDatabase(log?: (line: string) => void): Promise<DatabaseLocation> {
  const url = process.env.DATABASE_URL;
  if (url) return { url, adminUrl: url, embedded: false, stop: async () => {} };
  const db: EmbeddedDatabase = await startEmbeddedPostgres({ log });
  return { ...db, embedded: true };
}
