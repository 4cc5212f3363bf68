// The two-knock test: replay a day of inbound messages into a fresh database, snapshot, replay the
// whole day again into the same database, snapshot again: the two must be equal byte for byte. Every
// message is a duplicate the second time, and a duplicate must change nothing at all.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { Config } from '../config.ts';
import { parseLog } from '../replay/messages.ts';
import { replayLog, type ReplaySummary } from '../replay/replay.ts';
import { snapshot } from '../replay/snapshot.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { dayLog } from './helpers/dayLog.ts';
import { startInstance, type Instance } from './helpers/instance.ts';

const SECRET_ENV = 'ONEJOB_TEST_HOOKED_SECRET';
process.env[SECRET_ENV] = `whsec_${Buffer.from('two-knock-test-secret-0123456789').toString('base64')}`;

const config = Config.parse({
  providers: {
    primary: { kind: 'manual', timeoutMs: 3_600_000 },
    backup: { kind: 'manual', timeoutMs: 3_600_000 },
    hooked: { kind: 'manual', timeoutMs: 3_600_000, webhookSecretEnv: SECRET_ENV },
  },
});

const run = promisify(execFile);

/** The first line where two snapshots part, to make a failure readable. */
function firstDifference(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  const i = x.findIndex((line, n) => line !== y[n]);
  return i < 0 ? `(lengths ${x.length} vs ${y.length})` : `line ${i + 1}:\n- ${x[i]}\n+ ${y[i]}`;
}

async function knockTwice(db: TestDatabase, api: Instance, text: string, tokensFile: string) {
  const messages = parseLog(text);
  const options = { url: api.url, db: db.pool, config, tokensFile };
  const first: ReplaySummary = await replayLog(messages, options);
  const before = await snapshot(db.pool);
  const second: ReplaySummary = await replayLog(messages, options);
  const after = await snapshot(db.pool);
  return { first, second, before, after, messages };
}

describe('the two-knock replay', () => {
  let db: TestDatabase;
  let api: Instance;
  const dir = mkdtempSync(path.join(tmpdir(), 'onejob-two-knock-'));

  beforeAll(async () => {
    db = await createTestDatabase('two_knock');
    api = await startInstance(db.url, { config });
  });

  it('a day of a few thousand mixed messages, replayed twice, leaves the same state byte for byte', { timeout: 600_000 }, async () => {
    const log = dayLog({ seed: 20261130, jobs: 900 });
    const file = path.join(dir, 'day.jsonl');
    writeFileSync(file, log.map((m) => JSON.stringify(m)).join('\n'));
    const { first, second, before, after, messages } = await knockTwice(db, api, log.map((m) => JSON.stringify(m)).join('\n'), path.join(dir, 'tokens.json'));

    expect(messages.length).toBeGreaterThan(2_500);
    expect(first.unresolved).toBe(0);
    expect(second.unresolved).toBe(0);
    expect(first.sent).toBe(messages.length);
    // The day really exercised the fractures: wins, losses, failures, cancels, webhooks.
    const { rows } = await db.pool.query(`SELECT state, count(*)::int AS n FROM attempts GROUP BY state`);
    const states = Object.fromEntries(rows.map((r) => [r.state, r.n]));
    for (const state of ['SUCCEEDED', 'FAILED', 'DISCARDED', 'CANCELLED']) expect(states[state], state).toBeGreaterThan(0);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM race_log`)).rows[0].n).toBeGreaterThan(0);

    if (after !== before) throw new Error(`the second knock changed the state at ${firstDifference(before, after)}`);
    expect(after).toBe(before);
  });

  it('the onejob replay and snapshot commands do the same from the command line', { timeout: 120_000 }, async () => {
    const log = dayLog({ seed: 7, jobs: 15 });
    const file = path.join(dir, 'small.jsonl');
    writeFileSync(file, log.map((m) => JSON.stringify(m)).join('\n'));
    const configFile = path.join(dir, 'config.json');
    writeFileSync(configFile, JSON.stringify(config));
    const env = { ...process.env, DATABASE_URL: db.url, ONEJOB_CONFIG: configFile };
    const args = ['bin/onejob.mjs', 'replay', file, '--url', api.url, '--tokens', path.join(dir, 'cli-tokens.json')];
    const summary = JSON.parse((await run('node', args, { env })).stdout) as ReplaySummary;
    expect(summary).toMatchObject({ sent: log.length, unresolved: 0 });
    const once = (await run('node', ['bin/onejob.mjs', 'snapshot'], { env, maxBuffer: 64 * 1024 * 1024 })).stdout;
    await run('node', args, { env });
    const twice = (await run('node', ['bin/onejob.mjs', 'snapshot'], { env, maxBuffer: 64 * 1024 * 1024 })).stdout;
    expect(once).toMatch(/^# attempts \(\d+\)$/m);
    expect(twice === once, firstDifference(once, twice)).toBe(true);
  });
});

describe('the two-knock test catches nondeterminism', () => {
  it('a timestamp written on replay makes the snapshots differ', { timeout: 300_000 }, async () => {
    const db = await createTestDatabase('two_knock_planted');
    const api = await startInstance(db.url, { config });
    const dir = mkdtempSync(path.join(tmpdir(), 'onejob-planted-'));
    // The plant: whenever createJob answers a replay, something writes "last seen" onto the key.
    const pool = api.app.core.pool;
    const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;
    (pool as unknown as { query: unknown }).query = async (...args: unknown[]) => {
      const result = await query(...args);
      const row = result.rows?.[0];
      if (typeof args[0] === 'string' && row?.claim === 'held') {
        await query(`UPDATE idempotency_keys SET created_at = clock_timestamp() WHERE job_id = $1`, [row.id]);
      }
      return result;
    };
    const log = dayLog({ seed: 99, jobs: 60 }).map((m) => JSON.stringify(m)).join('\n');
    const { before, after } = await knockTwice(db, api, log, path.join(dir, 'tokens.json'));
    expect(after).not.toBe(before);
    expect(firstDifference(before, after)).toMatch(/idempotency_keys|created_at/);
  });
});
