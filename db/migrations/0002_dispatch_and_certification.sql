-- Dispatching attempts to providers, reconciling the ones whose outcome is unknown, and the contract
-- certifications that automatic failover requires.

-- Each attempt is sent to its provider at most once. The runner that claims it writes its instance id
-- and a fresh fencing token; every later write by that runner carries the token, so a runner that lost
-- its claim (the attempt was settled, cancelled or went UNKNOWN meanwhile) cannot write.
CREATE SEQUENCE attempt_lease_tokens;

ALTER TABLE attempts
  ADD COLUMN dispatched_by       text,
  ADD COLUMN dispatched_at       timestamptz,
  ADD COLUMN lease_token         bigint,
  ADD COLUMN provider_request_id text,
  ADD COLUMN prompt_tokens       integer CHECK (prompt_tokens >= 0),
  ADD COLUMN usage_tokens        integer CHECK (usage_tokens >= 0),
  ADD COLUMN reconciled_at       timestamptz,
  ADD CONSTRAINT attempts_dispatch_complete
    CHECK ((dispatched_at IS NULL) = (dispatched_by IS NULL) AND (dispatched_at IS NULL) = (lease_token IS NULL));

-- A dispatched attempt is never dispatched again: once set, the claim is immutable.
CREATE FUNCTION attempts_refuse_redispatch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.dispatched_at IS NOT NULL AND (NEW.dispatched_at IS DISTINCT FROM OLD.dispatched_at
      OR NEW.lease_token IS DISTINCT FROM OLD.lease_token OR NEW.dispatched_by IS DISTINCT FROM OLD.dispatched_by) THEN
    RAISE EXCEPTION 'attempt % was already dispatched', OLD.id
      USING ERRCODE = 'check_violation', CONSTRAINT = 'attempts_dispatched_once';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER attempts_dispatched_once BEFORE UPDATE ON attempts
  FOR EACH ROW EXECUTE FUNCTION attempts_refuse_redispatch();

-- Attempts waiting for a runner.
CREATE INDEX attempts_awaiting_dispatch ON attempts (started_at) WHERE state = 'STARTING' AND dispatched_at IS NULL;
-- Attempts a reconciler may settle.
CREATE INDEX attempts_unknown ON attempts (reconciled_at NULLS FIRST) WHERE state = 'UNKNOWN';

-- Wakes the runners of every instance when an attempt is waiting to be sent.
CREATE FUNCTION attempts_notify_dispatch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM inserted WHERE state = 'STARTING') THEN
    PERFORM pg_notify('onejob_dispatch', '');
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER attempts_notify_dispatch AFTER INSERT ON attempts
  REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION attempts_notify_dispatch();

-- One row per run of an operation's fixtures through a provider. Valid for failover only while the
-- operation's prompt version and output schema hash are the ones it was earned with.
CREATE TABLE certifications (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  provider           text NOT NULL,
  model              text NOT NULL,
  operation          text NOT NULL,
  template_version   text NOT NULL,
  output_schema_hash text NOT NULL,
  passed             boolean NOT NULL,
  fixtures           integer NOT NULL CHECK (fixtures >= 0),
  failures           jsonb NOT NULL DEFAULT '[]',
  prompt_tokens      integer NOT NULL DEFAULT 0,
  certified_at       timestamptz NOT NULL,
  CHECK (passed = (jsonb_array_length(failures) = 0 AND fixtures > 0))
);

CREATE INDEX certifications_latest ON certifications (provider, operation, certified_at DESC);
