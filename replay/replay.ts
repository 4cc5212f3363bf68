// `onejob replay FILE`: plays a recorded message log against a running service, in order, as the
// original senders would: createJob and cancelJob as the owner, reports and cancelAttempt as an
// operator, provider webhooks signed with the provider's secret (re-signed now: the recorded
// signatures' timestamps would be stale). Replaying the same log twice must leave the service exactly
// as the first time: every message is a duplicate the second time (the two-knock test).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../config.ts';
import { createToken } from '../core/auth.ts';
import type { Role } from '../db/owners.ts';
import type { Queryable } from '../db/pool.ts';
import type { LogMessage } from './messages.ts';

export interface ReplayOptions {
  /** Base URL of the running service, e.g. http://127.0.0.1:4000 */
  url: string;
  /** The service's database: tokens for the log's senders are minted there, attempts looked up there. */
  db: Queryable;
  config: Config;
  /**
   * Where minted tokens are kept between runs. Minting on every run would write new token rows (and
   * move the owners' id sequence), so a second replay would not leave the state untouched.
   */
  tokensFile: string;
  env?: NodeJS.ProcessEnv;
}

export interface ReplaySummary {
  sent: number;
  /** Answers by outcome: "ok", or the error code / HTTP status of a refusal. */
  answers: Record<string, number>;
  /** Messages naming an attempt or job the service does not have. */
  unresolved: number;
}

const MUTATIONS = {
  createJob: `mutation($input: CreateJobInput!) { createJob(input: $input) { replayed job { id } } }`,
  report: `mutation($id: ID!, $result: JSON, $error: String) { reportAttemptResult(attemptId: $id, result: $result, error: $error) { outcome } }`,
  cancelAttempt: `mutation($id: ID!, $reason: String!) { cancelAttempt(attemptId: $id, reason: $reason) { id } }`,
  cancelJob: `mutation($id: ID!) { cancelJob(jobId: $id) { id } }`,
};

class Tokens {
  private readonly tokens: Record<string, string>;
  constructor(
    private readonly file: string,
    private readonly db: Queryable,
  ) {
    this.tokens = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>) : {};
  }
  async for(owner: string, role: Role): Promise<string> {
    const key = `${role}:${owner}`;
    if (!this.tokens[key]) {
      this.tokens[key] = (await createToken(this.db, owner, role)).token;
      mkdirSync(path.dirname(this.file), { recursive: true });
      writeFileSync(this.file, JSON.stringify(this.tokens, null, 2), { mode: 0o600 });
    }
    return this.tokens[key]!;
  }
}

/** The attempt (owner, key, number) names: of the job that holds the key now. */
async function findAttemptId(db: Queryable, owner: string, key: string, attemptNumber: number): Promise<string | undefined> {
  const { rows } = await db.query(
    `SELECT a.id FROM owners o
     JOIN idempotency_keys k ON k.owner_id = o.id AND k.idempotency_key = $2
     JOIN attempts a ON a.job_id = k.job_id AND a.number = $3
     WHERE o.name = $1`,
    [owner, key, attemptNumber],
  );
  return rows[0]?.id as string | undefined;
}

async function findJobId(db: Queryable, owner: string, key: string): Promise<string | undefined> {
  const { rows } = await db.query(
    `SELECT k.job_id FROM owners o JOIN idempotency_keys k ON k.owner_id = o.id AND k.idempotency_key = $2 WHERE o.name = $1`,
    [owner, key],
  );
  return rows[0]?.job_id as string | undefined;
}

async function graphql(url: string, token: string, query: string, variables: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { errors?: { extensions?: { code?: string } }[] };
  return body.errors?.length ? (body.errors[0]!.extensions?.code ?? `HTTP ${res.status}`) : 'ok';
}

async function webhook(opts: ReplayOptions, m: Extract<LogMessage, { type: 'webhook' }>, attemptId: string, index: number): Promise<string> {
  const provider = opts.config.providers[m.provider] as { webhookSecretEnv?: string } | undefined;
  const secret = provider?.webhookSecretEnv ? (opts.env ?? process.env)[provider.webhookSecretEnv] : undefined;
  if (!secret) return 'no webhook secret for provider';
  const body = JSON.stringify({
    attemptId,
    requestId: m.requestId,
    status: m.status,
    ...(m.result !== undefined ? { result: m.result } : {}),
    ...(m.error !== undefined ? { error: m.error } : {}),
  });
  // A fresh webhook-id per send, as a sender that rebuilt its outbox would: the service must still
  // recognise the duplicate by its natural key.
  const id = `msg_replay_${Date.now()}_${index}`;
  const now = new Date();
  const signature = new Webhook(secret).sign(id, now, body);
  const res = await fetch(`${opts.url}/webhooks/${encodeURIComponent(m.provider)}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signature,
    },
    body,
  });
  await res.arrayBuffer();
  return res.ok ? 'ok' : `HTTP ${res.status}`;
}

export async function replayLog(messages: LogMessage[], opts: ReplayOptions): Promise<ReplaySummary> {
  const tokens = new Tokens(opts.tokensFile, opts.db);
  const summary: ReplaySummary = { sent: 0, answers: {}, unresolved: 0 };
  const count = (answer: string) => (summary.answers[answer] = (summary.answers[answer] ?? 0) + 1);
  for (const [index, m] of messages.entries()) {
    let answer: string;
    if (m.type === 'createJob') {
      answer = await graphql(opts.url, await tokens.for(m.owner, 'owner'), MUTATIONS.createJob, { input: m.input });
    } else if (m.type === 'cancelJob') {
      const jobId = await findJobId(opts.db, m.owner, m.idempotencyKey);
      if (!jobId) {
        summary.unresolved++;
        continue;
      }
      answer = await graphql(opts.url, await tokens.for(m.owner, 'owner'), MUTATIONS.cancelJob, { id: jobId });
    } else {
      const attemptId = await findAttemptId(opts.db, m.owner, m.idempotencyKey, m.attemptNumber);
      if (!attemptId) {
        summary.unresolved++;
        continue;
      }
      if (m.type === 'webhook') answer = await webhook(opts, m, attemptId, index);
      else if (m.type === 'cancelAttempt') {
        answer = await graphql(opts.url, await tokens.for(m.operator, 'operator'), MUTATIONS.cancelAttempt, { id: attemptId, reason: m.reason });
      } else {
        answer = await graphql(opts.url, await tokens.for(m.operator, 'operator'), MUTATIONS.report, {
          id: attemptId,
          result: m.result,
          error: m.error,
        });
      }
    }
    summary.sent++;
    count(answer);
  }
  return summary;
}
