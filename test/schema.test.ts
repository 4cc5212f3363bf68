// The database holds the invariants by itself: these tests go around the application on purpose.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { ATTEMPT_STATES, ATTEMPT_TRANSITIONS } from '../db/states.ts';
import { loadMigrations, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { makeToken } from './helpers/instance.ts';

let db: TestDatabase;
let ownerId: number;

beforeAll(async () => {
  db = await createTestDatabase('schema');
  ownerId = (await makeToken(db.pool, 'schema-owner')).caller.ownerId;
});

async function insertJob(): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `INSERT INTO jobs (id, owner_id, idempotency_key, operation, provider, input, fingerprint, created_at, key_expires_at)
     VALUES ($1, $2, $3, 'summarize', 'primary', '{}', 'f', now(), now() + interval '1 day')`,
    [id, ownerId, `key-${id}`],
  );
  return id;
}

async function insertAttempt(jobId: string, number: number, state: string): Promise<string> {
  const id = randomUUID();
  const finished = ['STARTING', 'RUNNING', 'UNKNOWN'].includes(state) ? null : new Date();
  await db.pool.query(
    `INSERT INTO attempts (id, job_id, number, provider, state, read_version, started_at, deadline_at, finished_at)
     VALUES ($1, $2, $3, 'primary', $4, 1, now(), now() + interval '1 minute', $5)`,
    [id, jobId, number, state, finished],
  );
  return id;
}

describe('the attempt state machine', () => {
  it('in the database is the same table as in db/states.ts', async () => {
    const { rows } = await db.pool.query('SELECT from_state, to_state FROM attempt_transitions');
    const inDb = rows.map((r) => `${r.from_state}->${r.to_state}`).sort();
    const inCode = ATTEMPT_STATES.flatMap((from) => ATTEMPT_TRANSITIONS[from].map((to) => `${from}->${to}`)).sort();
    expect(inDb).toEqual(inCode);
  });

  it('refuses every move the table forbids, and allows every move it lists', async () => {
    for (const from of ATTEMPT_STATES) {
      for (const to of ATTEMPT_STATES) {
        if (from === to) continue;
        const jobId = await insertJob();
        const id = await insertAttempt(jobId, 1, from);
        const finished = ['STARTING', 'RUNNING', 'UNKNOWN'].includes(to) ? null : new Date();
        const attempt = db.pool.query('UPDATE attempts SET state = $2, finished_at = $3 WHERE id = $1', [id, to, finished]);
        if (ATTEMPT_TRANSITIONS[from].includes(to)) await expect(attempt).resolves.toBeDefined();
        else await expect(attempt).rejects.toThrow(/may not move/);
      }
    }
  });

  it('allows one live attempt per job, and attempt numbers are unique per job', async () => {
    const jobId = await insertJob();
    await insertAttempt(jobId, 1, 'UNKNOWN');
    await expect(insertAttempt(jobId, 2, 'STARTING')).rejects.toThrow(/attempts_one_live_per_job/);
    await expect(insertAttempt(jobId, 1, 'FAILED')).rejects.toThrow(/attempts_job_id_number_key/);
    await expect(insertAttempt(jobId, 2, 'FAILED')).resolves.toBeDefined();
  });

  it('a live attempt has no finished_at and a settled one has', async () => {
    const jobId = await insertJob();
    await expect(insertAttempt(jobId, 1, 'RUNNING').then((id) =>
      db.pool.query("UPDATE attempts SET finished_at = now() WHERE id = $1", [id]))).rejects.toThrow(/check/);
  });
});

describe('jobs, keys and events', () => {
  it('(owner, key) is unique in the key table; a job cannot be both won and cancelled', async () => {
    const jobId = await insertJob();
    const claim = () =>
      db.pool.query(
        `INSERT INTO idempotency_keys (owner_id, idempotency_key, job_id, created_at, expires_at)
         VALUES ($1, 'k', $2, now(), now() + interval '1 day')`,
        [ownerId, jobId],
      );
    await claim();
    await expect(claim()).rejects.toThrow(/idempotency_keys_pkey/);
    const attemptId = await insertAttempt(jobId, 1, 'SUCCEEDED');
    await expect(
      db.pool.query(`UPDATE jobs SET completed_by = $2, result = '{}', cancelled_at = now() WHERE id = $1`, [jobId, attemptId]),
    ).rejects.toThrow(/check/);
  });

  it('events are gap-free and append-only', async () => {
    const jobId = await insertJob();
    const append = (seq: number) =>
      db.pool.query(`INSERT INTO job_events (job_id, seq, type, job_status, at) VALUES ($1, $2, 'JOB_CREATED', 'PENDING', now())`, [jobId, seq]);
    await append(1);
    await expect(append(3)).rejects.toThrow(/gap/);
    await expect(append(1)).rejects.toThrow(/gap|job_events_pkey/);
    await append(2);
    await expect(db.pool.query('DELETE FROM job_events WHERE job_id = $1', [jobId])).rejects.toThrow(/append-only/);
  });
});

describe('migrations', () => {
  it('ten instances starting at once apply each migration exactly once', async () => {
    const { url } = await createEmptyDatabase('migrate_race');
    const pools = Array.from({ length: 10 }, () => createPool(url, 1));
    try {
      const applied = await Promise.all(pools.map((p) => migrate(p)));
      const expected = (await loadMigrations()).map((m) => m.version);
      expect(applied.flat().sort()).toEqual(expected);
      const { rows } = await pools[0]!.query('SELECT version FROM schema_migrations ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(expected);
      expect(await migrate(pools[0]!)).toEqual([]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });
});
