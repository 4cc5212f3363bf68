-- Inbound provider webhooks (CONTRACT.md section 8). One row per natural key of a delivery:
-- (provider, request_id, status). The key, not the Standard Webhooks `webhook-id`, is what makes a
-- delivery a duplicate: a sender that loses its outbox and re-sends the same result under a new
-- webhook-id must still be recognised. The primary key is the guard: the first delivery's
-- INSERT ... ON CONFLICT DO NOTHING wins, and every concurrent duplicate waits on it and inserts nothing.
CREATE TABLE webhook_deliveries (
  provider    text NOT NULL,
  request_id  text NOT NULL CHECK (char_length(request_id) BETWEEN 1 AND 255),
  status      text NOT NULL CHECK (status IN ('succeeded', 'failed')),
  attempt_id  uuid NOT NULL REFERENCES attempts (id),
  -- What settling the attempt answered (ReportOutcome). NULL only inside the transaction that inserted
  -- the row, between the insert and the settlement; the deferred trigger below refuses a commit that
  -- leaves it NULL, so a duplicate always finds the first delivery's answer.
  outcome     text CHECK (outcome IN ('WON', 'DISCARDED', 'FAILED')),
  received_at timestamptz NOT NULL,
  -- received_at + 3 x the provider's senderRetryWindowSeconds, as answered in Dedup-Expires-At.
  expires_at  timestamptz NOT NULL CHECK (expires_at > received_at),
  -- The webhook-id of the first delivery only, for the operator tracing a sender's message.
  webhook_id  text NOT NULL,
  PRIMARY KEY (provider, request_id, status)
);

-- For a purge of expired keys, and an operator's "which deliveries touched this attempt".
CREATE INDEX webhook_deliveries_expiry ON webhook_deliveries (expires_at);
CREATE INDEX webhook_deliveries_attempt ON webhook_deliveries (attempt_id);

CREATE FUNCTION webhook_deliveries_require_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Runs at commit: reads the row as the transaction left it, not as it was inserted.
  IF EXISTS (
    SELECT FROM webhook_deliveries
    WHERE provider = NEW.provider AND request_id = NEW.request_id AND status = NEW.status AND outcome IS NULL
  ) THEN
    RAISE EXCEPTION 'webhook delivery (%, %, %) committed without an outcome', NEW.provider, NEW.request_id, NEW.status
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_deliveries_outcome_at_commit';
  END IF;
  RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER webhook_deliveries_outcome_at_commit
  AFTER INSERT ON webhook_deliveries DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION webhook_deliveries_require_outcome();

-- A recorded delivery is history: once its outcome is set, nothing about it changes (a duplicate must
-- answer exactly what the first delivery answered). DELETE is left open for a purge of expired keys.
CREATE FUNCTION webhook_deliveries_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.outcome IS NULL AND NEW.outcome IS NOT NULL
     AND (NEW.provider, NEW.request_id, NEW.status, NEW.attempt_id, NEW.received_at, NEW.expires_at, NEW.webhook_id)
         = (OLD.provider, OLD.request_id, OLD.status, OLD.attempt_id, OLD.received_at, OLD.expires_at, OLD.webhook_id) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'webhook delivery (%, %, %) is final', OLD.provider, OLD.request_id, OLD.status
    USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_deliveries_final';
END $$;

CREATE TRIGGER webhook_deliveries_final BEFORE UPDATE ON webhook_deliveries
  FOR EACH ROW EXECUTE FUNCTION webhook_deliveries_refuse_change();
