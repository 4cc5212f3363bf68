// A real HTTP receiver for onejob's outbound callbacks on 127.0.0.1 (port 0). Each path is one
// endpoint that can be scripted: verify signatures with a secret (standardwebhooks' Webhook.verify,
// as a real receiver would), answer 500 to the first N requests, or run a hook on every request.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll } from 'vitest';

export interface ReceivedCallback {
  path: string;
  headers: Record<string, string>;
  body: string;
  receivedAt: number;
  /** null: no secret was set for the path, so nothing was checked. */
  verified: boolean | null;
  /** What the receiver answered. */
  status: number;
  /** What the endpoint's onRequest hook answered, if it has one. */
  note?: unknown;
}

export interface EndpointScript {
  /** Verify webhook-signature with this `whsec_…` secret; a bad one is answered 401. */
  secret?: string;
  /** Answer 500 to this many requests first (counted per endpoint). */
  failFirst?: number;
  /** Runs before answering; its answer is kept in `note`. */
  onRequest?: (req: { headers: Record<string, string>; body: string }) => Promise<unknown>;
}

export interface WebhookReceiver {
  /** http://127.0.0.1:port */
  url: string;
  readonly received: ReceivedCallback[];
  /** Sets (or replaces) how `path` answers. */
  script(path: string, script: EndpointScript): void;
  /** Requests to `path`, optionally only those with this webhook-id. */
  at(path: string, webhookId?: string): ReceivedCallback[];
  close(): Promise<void>;
}

function headersOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') out[k] = v;
  return out;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedCallback[] = [];
  const scripts = new Map<string, EndpointScript & { failed: number }>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const headers = headersOf(req);
      const body = Buffer.concat(chunks).toString('utf8');
      const script = scripts.get(path);
      let verified: boolean | null = null;
      if (script?.secret) {
        try {
          new Webhook(script.secret).verify(body, headers);
          verified = true;
        } catch {
          verified = false;
        }
      }
      const note = script?.onRequest ? await script.onRequest({ headers, body }).catch((err: unknown) => String(err)) : undefined;
      let status = 204;
      if (verified === false) status = 401;
      else if (script && script.failed < (script.failFirst ?? 0)) {
        script.failed++;
        status = 500;
      }
      received.push({ path, headers, body, receivedAt: Date.now(), verified, status, note });
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status === 500 ? 'receiver scripted to fail' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}`,
    received,
    script(path, script) {
      scripts.set(path, { ...script, failed: 0 });
    },
    at(path, webhookId) {
      return received.filter((r) => r.path === path && (webhookId === undefined || r.headers['webhook-id'] === webhookId));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  afterAll(() => receiver.close());
  return receiver;
}
