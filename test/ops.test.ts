// What operators run: health, metrics, the token command.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { gql, dataOf, errorCode } from './helpers/graphql.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { startInstance, type Instance } from './helpers/instance.ts';

const run = promisify(execFile);
let db: TestDatabase;
let api: Instance;

beforeAll(async () => {
  db = await createTestDatabase('ops');
  api = await startInstance(db.url);
});

describe('onejob token create', () => {
  it('prints exactly one token on stdout, and it authenticates with the given role', async () => {
    const env = { ...process.env, DATABASE_URL: db.url };
    const owner = await run('node', ['bin/onejob.mjs', 'token', 'create', '--owner', 'cli-owner'], { env });
    expect(owner.stdout).toMatch(/^oj_[A-Za-z0-9_-]{43}\n$/);
    const operator = await run('node', ['bin/onejob.mjs', 'token', 'create', '--owner', 'cli-ops', '--role', 'operator'], { env });
    const token = owner.stdout.trim();
    expect(dataOf(await gql(api.graphqlUrl, token, '{ jobs { edges { cursor } } }')).jobs.edges).toEqual([]);
    const forbidden = await gql(api.graphqlUrl, token, 'mutation { cancelAttempt(attemptId: "00000000-0000-4000-8000-000000000000", reason: "x") { id } }');
    expect(errorCode(forbidden)).toBe('FORBIDDEN');
    const asOperator = await gql(api.graphqlUrl, operator.stdout.trim(), 'mutation { cancelAttempt(attemptId: "00000000-0000-4000-8000-000000000000", reason: "x") { id } }');
    expect(errorCode(asOperator)).toBe('NOT_FOUND');
  });

  it('refuses a missing owner or a bad role with a usage message and exit code 2', async () => {
    const env = { ...process.env, DATABASE_URL: db.url };
    await expect(run('node', ['bin/onejob.mjs', 'token', 'create'], { env })).rejects.toMatchObject({ code: 2, stdout: '' });
    await expect(run('node', ['bin/onejob.mjs', 'token', 'create', '--owner', 'x', '--role', 'root'], { env })).rejects.toMatchObject({ code: 2 });
  });
});

describe('health and metrics', () => {
  it('/metrics serves Prometheus text with the GraphQL request metrics', async () => {
    await gql(api.graphqlUrl, undefined, '{ __typename }');
    const res = await fetch(`${api.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    expect(await res.text()).toMatch(/graphql_yoga_http_duration/);
  });

  it('/healthz is 200 while the database answers and 503 once it does not', async () => {
    const own = await createTestDatabase('ops_health');
    const instance = await startInstance(own.url);
    expect((await fetch(`${instance.url}/healthz`)).status).toBe(200);
    const admin = new pg.Client({ connectionString: inject('adminUrl') });
    await admin.connect();
    await own.pool.end().catch(() => {});
    await admin.query(`DROP DATABASE ${own.name} WITH (FORCE)`);
    await admin.end();
    const res = await fetch(`${instance.url}/healthz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'database unavailable' });
  });
});
