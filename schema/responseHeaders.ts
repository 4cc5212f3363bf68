// Response headers a resolver wants on its HTTP answer (e.g. Idempotent-Replayed). Kept per request
// object and copied onto the response by a Yoga plugin; a WebSocket operation has no request and sets none.
import type { Plugin } from 'graphql-yoga';

const pending = new WeakMap<Request, Headers>();

export function setResponseHeader(request: Request | undefined, name: string, value: string): void {
  if (!request) return;
  let headers = pending.get(request);
  if (!headers) {
    headers = new Headers();
    pending.set(request, headers);
  }
  headers.set(name, value);
}

export function useResponseHeaders(): Plugin {
  return {
    onResponse({ request, response }) {
      pending.get(request)?.forEach((value, name) => response.headers.set(name, value));
    },
  };
}
