-- Outcome effects (CONTRACT.md section 8): the usage ledger and the outbound callback outbox. Each
-- effect has its own effect key and its own record, written in the same transaction as the job's
-- change that causes it, so an effect exists if and only if its cause committed. The two are
-- independent: a callback that keeps failing never touches the ledger, and the reverse.

-- The usage ledger: one debit per succeeded job, keyed by 'job:{jobId}:charge'. The primary key is
-- the exactly-once guard (INSERT … ON CONFLICT DO NOTHING), so a duplicate report, a retried
-- transaction or a second instance can never debit twice. It is history: never updated, never deleted.
CREATE TABLE usage_ledger (
  effect_key text PRIMARY KEY,
  owner_id   bigint NOT NULL REFERENCES owners (id),
  job_id     uuid NOT NULL REFERENCES jobs (id),
  -- The winning attempt, whose reported token count the units are.
  attempt_id uuid NOT NULL REFERENCES attempts (id),
  units      integer NOT NULL CHECK (units > 0),
  at         timestamptz NOT NULL
);

-- The usage query: an owner's entries, newest first.
CREATE INDEX usage_ledger_owner_newest ON usage_ledger (owner_id, at DESC, effect_key DESC);

CREATE FUNCTION usage_ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the usage ledger is append-only' USING ERRCODE = 'check_violation';
END $$;

CREATE TRIGGER usage_ledger_append_only BEFORE UPDATE OR DELETE ON usage_ledger
  FOR EACH ROW EXECUTE FUNCTION usage_ledger_refuse_change();

-- Each owner's callback: one row per owner, replaced by setCallback. The secret is kept in clear
-- because signing (HMAC) needs it; it is answered only once, by setCallback.
CREATE TABLE callbacks (
  owner_id   bigint PRIMARY KEY REFERENCES owners (id),
  url        text NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
  secret     text NOT NULL CHECK (secret LIKE 'whsec\_%'),
  updated_at timestamptz NOT NULL
);

-- The outbox: one row per notification, keyed by 'job:{jobId}:{succeeded|failed|cancelled}', which
-- is also its webhook-id and Idempotency-Key on every try. url, secret and body are captured when the
-- job reached its outcome: a later setCallback does not redirect or re-sign what is already queued.
-- body is text, not jsonb: the bytes signed must be the same on every try (jsonb would reorder keys).
CREATE TABLE callback_outbox (
  effect_key      text PRIMARY KEY,
  owner_id        bigint NOT NULL REFERENCES owners (id),
  job_id          uuid NOT NULL REFERENCES jobs (id),
  url             text NOT NULL,
  secret          text NOT NULL,
  body            text NOT NULL,
  created_at      timestamptz NOT NULL,
  -- created_at + 3 × effects.senderRetryWindowSeconds: until then the key must stay to refuse a
  -- second notification of the same outcome; after it a sweeper may delete delivered rows.
  expires_at      timestamptz NOT NULL CHECK (expires_at > created_at),
  -- Tries so far, and when the next one is due.
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at timestamptz NOT NULL,
  -- The lease of the worker trying it now: others skip the row until claimed_until passes. claim_token
  -- fences the worker's writes, so one whose lease ran out cannot overwrite a newer claim's outcome.
  claimed_until   timestamptz,
  claim_token     uuid,
  last_attempt_at timestamptz,
  last_status     integer,
  last_error      text,
  -- Retried with backoff until a 2xx (CONTRACT.md section 8): there is no giving up, only a capped delay.
  delivered_at    timestamptz
);

-- The delivery workers' poll: only rows still to be delivered.
CREATE INDEX callback_outbox_due ON callback_outbox (next_attempt_at)
  WHERE delivered_at IS NULL;
-- The expiry sweep (written elsewhere) reads by expires_at.
CREATE INDEX callback_outbox_expiry ON callback_outbox (expires_at);
CREATE INDEX callback_outbox_job ON callback_outbox (job_id);
