// A plain GraphQL-over-HTTP client (what a web or mobile client sends), and a graphql-ws client.
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll } from 'vitest';

export interface GraphQLResponse<T = any> {
  status: number;
  headers: Headers;
  data?: T;
  errors?: { message: string; extensions?: Record<string, any>; path?: unknown[] }[];
}

export async function gql<T = any>(
  graphqlUrl: string,
  token: string | undefined,
  query: string,
  variables?: Record<string, unknown>,
): Promise<GraphQLResponse<T>> {
  const res = await fetch(graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: GraphQLResponse['errors'] };
  return { status: res.status, headers: res.headers, ...body };
}

/** The one error code of a refused request (fails the test if there is not exactly one error). */
export function errorCode(res: GraphQLResponse): string | undefined {
  if (res.errors?.length !== 1) throw new Error(`expected one error, got ${JSON.stringify(res.errors ?? res.data)}`);
  return res.errors[0]!.extensions?.code;
}

/** Data of a request that must succeed. */
export function dataOf<T>(res: GraphQLResponse<T>): T {
  if (res.errors?.length || !res.data) throw new Error(`request failed: ${JSON.stringify(res.errors)}`);
  return res.data;
}

export function wsClient(graphqlUrl: string, token: string): Client {
  const client = createClient({
    url: graphqlUrl.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
    lazy: true,
  });
  afterAll(() => client.dispose());
  return client;
}

export const CREATE_JOB = /* GraphQL */ `
  mutation CreateJob($input: CreateJobInput!) {
    createJob(input: $input) {
      replayed
      job {
        id idempotencyKey operation provider fallbackProviders input status version result keyExpiresAt createdAt
        completedBy { id number }
        attempts { id jobId number provider state readVersion error startedAt deadlineAt finishedAt }
      }
    }
  }`;

export const JOB = /* GraphQL */ `
  query Job($id: ID!) {
    job(id: $id) {
      id status version result
      completedBy { id number }
      attempts { id number provider state readVersion error finishedAt }
    }
  }`;

export const RETRY_JOB = /* GraphQL */ `
  mutation Retry($jobId: ID!, $provider: String) {
    retryJob(jobId: $jobId, provider: $provider) { id number provider state readVersion }
  }`;

export const CANCEL_JOB = /* GraphQL */ `
  mutation CancelJob($jobId: ID!) { cancelJob(jobId: $jobId) { id status version attempts { id state } } }`;

export const CANCEL_ATTEMPT = /* GraphQL */ `
  mutation CancelAttempt($attemptId: ID!, $reason: String!) {
    cancelAttempt(attemptId: $attemptId, reason: $reason) { id state error }
  }`;

export const REPORT = /* GraphQL */ `
  mutation Report($attemptId: ID!, $result: JSON, $error: String) {
    reportAttemptResult(attemptId: $attemptId, result: $result, error: $error) {
      outcome
      attempt { id number state }
      job { id status version result completedBy { id } attempts { id number provider state } }
    }
  }`;

export const summarizeInput = (key: string, extra: Record<string, unknown> = {}) => ({
  idempotencyKey: key,
  operation: 'summarize',
  provider: 'primary',
  fallbackProviders: ['backup'],
  input: { text: 'The quick brown fox jumps over the lazy dog, again and again, all day long.' },
  ...extra,
});

export const GOOD_SUMMARY = { summary: 'A fox jumps.', keyPoints: ['fox', 'dog'] };
