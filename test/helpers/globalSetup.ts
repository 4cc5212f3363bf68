// Once per test run: the database server (DATABASE_URL, or the embedded Postgres of the working
// directory) and a template database with every migration applied, which each test file clones.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { openDatabase, type DatabaseLocation } from '../../db/database.ts';
import { migrate } from '../../db/migrate.ts';
import { createPool } from '../../db/pool.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    templateDatabase: string;
  }
}

let db: DatabaseLocation | undefined;
let template: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  db = await openDatabase(undefined, { throwaway: true });
  template = `onejob_template_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: db.adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${template}`);
  } finally {
    await admin.end();
  }
  const pool = createPool(withDatabase(db.adminUrl, template), 2);
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
  project.provide('adminUrl', db.adminUrl);
  project.provide('templateDatabase', template);
}

export async function teardown(): Promise<void> {
  if (db && template) {
    const admin = new pg.Client({ connectionString: db.adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
  await db?.stop();
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
