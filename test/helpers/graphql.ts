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

/** A graphql-ws client as a web or mobile client makes one: authenticated at connection. */
export function newWsClient(graphqlUrl: string, token: string): Client {
  return createClient({
    url: graphqlUrl.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
    lazy: true,
  });
}

/** A graphql-ws client for the whole test file, disposed after it. */
export function wsClient(graphqlUrl: string, token: string): Client {
  const client = newWsClient(graphqlUrl, token);
  afterAll(() => client.dispose());
  return client;
}

export * from './documents.ts';
