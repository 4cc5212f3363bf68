// GraphQL over HTTP conformance: graphql-http's server audits against a real instance. Every audit
// the spec marks MUST passes; the service's own auth is satisfied by a fetch that adds a valid token.
import { serverAudits, type Audit } from 'graphql-http';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { makeToken, startInstance, type Instance } from './helpers/instance.ts';

let db: TestDatabase;
let api: Instance;
let token: string;

// serverAudits only builds the list (each audit reads url lazily), so it can run before the server.
const audits: Audit[] = serverAudits({
  url: () => api.graphqlUrl,
  fetchFn: (input: RequestInfo | URL, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  },
});
const mustAudits = audits.filter((a) => a.name.startsWith('MUST'));

beforeAll(async () => {
  db = await createTestDatabase('audits');
  api = await startInstance(db.url);
  token = (await makeToken(db.pool, 'auditor')).token;
});

describe('graphql-http server audits (MUST)', () => {
  it('has MUST audits to run', () => {
    expect(mustAudits.length).toBeGreaterThan(10);
  });

  it('control: without the token an audit fails, so the passes below are the authenticated service', async () => {
    const [accept] = serverAudits({ url: () => api.graphqlUrl, fetchFn: fetch }).filter((a) => a.name === 'MUST accept POST requests');
    const result = await accept!.fn();
    expect(result.status).toBe('error');
    if (result.status !== 'ok') expect(result.response.status).toBe(401);
  });

  for (const audit of mustAudits) {
    it(audit.name, async () => {
      const result = await audit.fn();
      if (result.status !== 'ok') {
        let body = '';
        try {
          body = await result.response.clone().text();
        } catch {
          body = '(body already read)';
        }
        expect.fail(`${result.status}: ${result.reason}\nstatus ${result.response.status}, body: ${body.slice(0, 500)}`);
      }
      expect(result.status).toBe('ok');
    });
  }
});
