-- onejob's core schema. Every guarantee the contract makes about jobs and attempts is held here,
-- by a constraint, an index or a trigger, so that no code path (and no operator with psql) can break it.

CREATE TYPE attempt_state AS ENUM (
  'STARTING', 'RUNNING', 'UNKNOWN', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'DISCARDED'
);

CREATE TYPE job_status AS ENUM ('PENDING', 'RUNNING', 'UNKNOWN', 'SUCCEEDED', 'FAILED', 'CANCELLED');

CREATE TYPE job_event_type AS ENUM (
  'JOB_CREATED', 'ATTEMPT_STARTED', 'ATTEMPT_RUNNING', 'ATTEMPT_UNKNOWN', 'ATTEMPT_SUCCEEDED',
  'ATTEMPT_FAILED', 'ATTEMPT_CANCELLED', 'ATTEMPT_DISCARDED', 'FALLBACK_BLOCKED',
  'JOB_SUCCEEDED', 'JOB_FAILED', 'JOB_CANCELLED'
);

CREATE TYPE token_role AS ENUM ('owner', 'operator');

CREATE TABLE owners (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 100),
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a token is stored: a leaked table does not leak credentials.
CREATE TABLE tokens (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  owner_id   bigint NOT NULL REFERENCES owners (id),
  role       token_role NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
  id                 uuid PRIMARY KEY,
  owner_id           bigint NOT NULL REFERENCES owners (id),
  idempotency_key    text NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
  operation          text NOT NULL,
  provider           text NOT NULL,
  fallback_providers text[] NOT NULL DEFAULT '{}',
  input              jsonb NOT NULL,
  attempt_timeout_ms integer CHECK (attempt_timeout_ms BETWEEN 100 AND 3600000),
  fingerprint        text NOT NULL,
  -- version moves only when a result wins or the job is cancelled (contract rule 15).
  version            integer NOT NULL DEFAULT 1 CHECK (version >= 1),
  result             jsonb,
  completed_by       uuid,
  cancelled_at       timestamptz,
  created_at         timestamptz NOT NULL,
  key_expires_at     timestamptz NOT NULL CHECK (key_expires_at > created_at),
  CHECK ((completed_by IS NULL) = (result IS NULL)),
  -- A cancel bumps the version, so no result can win after it; a won job cannot be cancelled.
  CHECK (completed_by IS NULL OR cancelled_at IS NULL)
);

CREATE INDEX jobs_owner_newest ON jobs (owner_id, created_at DESC, id DESC);
CREATE INDEX jobs_newest ON jobs (created_at DESC, id DESC);
CREATE INDEX jobs_owner_key ON jobs (owner_id, idempotency_key, created_at DESC);

-- The guard against a duplicate intent (rule 1). Kept apart from jobs because a key expires
-- (rule 5) while the job it guarded stays readable forever: expiry deletes or replaces this row,
-- never a job.
CREATE TABLE idempotency_keys (
  owner_id        bigint NOT NULL REFERENCES owners (id),
  idempotency_key text NOT NULL,
  job_id          uuid NOT NULL REFERENCES jobs (id),
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL CHECK (expires_at > created_at),
  PRIMARY KEY (owner_id, idempotency_key)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

CREATE TABLE attempts (
  id           uuid PRIMARY KEY,
  job_id       uuid NOT NULL REFERENCES jobs (id),
  number       integer NOT NULL CHECK (number >= 1),
  provider     text NOT NULL,
  state        attempt_state NOT NULL,
  read_version integer NOT NULL CHECK (read_version >= 1),
  error        text,
  started_at   timestamptz NOT NULL,
  deadline_at  timestamptz NOT NULL CHECK (deadline_at > started_at),
  finished_at  timestamptz,
  UNIQUE (job_id, number),
  -- A live attempt has not finished; every other state has.
  CHECK ((state IN ('STARTING', 'RUNNING', 'UNKNOWN')) = (finished_at IS NULL))
);

-- Rule 7: at most one live attempt per job, whatever code runs.
CREATE UNIQUE INDEX attempts_one_live_per_job ON attempts (job_id)
  WHERE state IN ('STARTING', 'RUNNING', 'UNKNOWN');

-- The deadline sweep reads only attempts that can still time out.
CREATE INDEX attempts_awaiting_deadline ON attempts (deadline_at)
  WHERE state IN ('STARTING', 'RUNNING');

ALTER TABLE jobs ADD CONSTRAINT jobs_completed_by_fkey
  FOREIGN KEY (completed_by) REFERENCES attempts (id);

-- The attempt state machine, mirrored from db/states.ts (a test checks that both agree).
CREATE TABLE attempt_transitions (
  from_state attempt_state NOT NULL,
  to_state   attempt_state NOT NULL,
  PRIMARY KEY (from_state, to_state)
);

INSERT INTO attempt_transitions (from_state, to_state) VALUES
  ('STARTING', 'RUNNING'), ('STARTING', 'UNKNOWN'), ('STARTING', 'FAILED'),
  ('STARTING', 'CANCELLED'), ('STARTING', 'SUCCEEDED'), ('STARTING', 'DISCARDED'),
  ('RUNNING', 'UNKNOWN'), ('RUNNING', 'FAILED'), ('RUNNING', 'CANCELLED'),
  ('RUNNING', 'SUCCEEDED'), ('RUNNING', 'DISCARDED'),
  ('UNKNOWN', 'FAILED'), ('UNKNOWN', 'CANCELLED'), ('UNKNOWN', 'SUCCEEDED'), ('UNKNOWN', 'DISCARDED'),
  ('CANCELLED', 'FAILED'), ('CANCELLED', 'SUCCEEDED'), ('CANCELLED', 'DISCARDED');

CREATE FUNCTION attempts_refuse_forbidden_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state <> OLD.state AND NOT EXISTS (
    SELECT 1 FROM attempt_transitions WHERE from_state = OLD.state AND to_state = NEW.state
  ) THEN
    RAISE EXCEPTION 'attempt % may not move from % to %', OLD.id, OLD.state, NEW.state
      USING ERRCODE = 'check_violation', CONSTRAINT = 'attempt_transitions';
  END IF;
  IF NEW.job_id <> OLD.job_id OR NEW.number <> OLD.number OR NEW.read_version <> OLD.read_version
     OR NEW.provider <> OLD.provider THEN
    RAISE EXCEPTION 'attempt % identity is immutable', OLD.id
      USING ERRCODE = 'check_violation', CONSTRAINT = 'attempt_identity';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER attempts_state_machine BEFORE UPDATE ON attempts
  FOR EACH ROW EXECUTE FUNCTION attempts_refuse_forbidden_transition();

-- The job's status is derived, never stored (rule 15: attempts changing never write the job row).
-- The live attempt, when there is one, is always the newest: a new attempt starts only when none is live.
CREATE FUNCTION job_status(completed_by uuid, cancelled_at timestamptz, newest_attempt_state attempt_state)
RETURNS job_status LANGUAGE sql IMMUTABLE AS $$
  SELECT (CASE
    WHEN completed_by IS NOT NULL THEN 'SUCCEEDED'
    WHEN cancelled_at IS NOT NULL THEN 'CANCELLED'
    WHEN newest_attempt_state IN ('STARTING', 'RUNNING') THEN 'RUNNING'
    WHEN newest_attempt_state = 'UNKNOWN' THEN 'UNKNOWN'
    WHEN newest_attempt_state = 'FAILED' THEN 'FAILED'
    ELSE 'PENDING'
  END)::job_status
$$;

-- A job as clients see it: its row, its derived status and its attempts in number order.
CREATE VIEW job_view AS
SELECT j.*,
       job_status(j.completed_by, j.cancelled_at, newest.state) AS status,
       coalesce(listed.attempts, '[]'::jsonb) AS attempts
FROM jobs j
LEFT JOIN LATERAL (
  SELECT a.state FROM attempts a WHERE a.job_id = j.id ORDER BY a.number DESC LIMIT 1
) newest ON true
LEFT JOIN LATERAL (
  SELECT jsonb_agg(to_jsonb(a) ORDER BY a.number) AS attempts FROM attempts a WHERE a.job_id = j.id
) listed ON true;

CREATE TABLE job_events (
  job_id         uuid NOT NULL REFERENCES jobs (id),
  seq            integer NOT NULL CHECK (seq >= 1),
  type           job_event_type NOT NULL,
  job_status     job_status NOT NULL,
  attempt_id     uuid REFERENCES attempts (id),
  attempt_number integer,
  attempt_state  attempt_state,
  provider       text,
  message        text,
  at             timestamptz NOT NULL,
  PRIMARY KEY (job_id, seq)
);

-- Gap-free seq: an event may only be appended right after the job's current last one.
CREATE FUNCTION job_events_refuse_gap() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.seq <> 1 + coalesce((SELECT max(seq) FROM job_events WHERE job_id = NEW.job_id), 0) THEN
    RAISE EXCEPTION 'event seq % for job % leaves a gap', NEW.seq, NEW.job_id
      USING ERRCODE = 'check_violation', CONSTRAINT = 'job_events_gap_free';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER job_events_gap_free BEFORE INSERT ON job_events
  FOR EACH ROW EXECUTE FUNCTION job_events_refuse_gap();

CREATE FUNCTION job_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'job events are append-only' USING ERRCODE = 'check_violation';
END $$;

CREATE TRIGGER job_events_append_only BEFORE UPDATE OR DELETE ON job_events
  FOR EACH ROW EXECUTE FUNCTION job_events_refuse_change();

-- The wake-up for subscribers on every instance. It carries only "job J has events up to seq S":
-- the table is the truth, so a lost notification delays an event but cannot lose it.
-- A new job's first events wake nobody: no one can have subscribed to a job before it exists, and a
-- subscriber reads stored events first. Skipping them matters: a transaction that notifies takes a
-- database-wide lock at commit, which would serialise every createJob.
CREATE FUNCTION job_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT job_id, max(seq) AS seq FROM appended GROUP BY job_id HAVING min(seq) > 1 LOOP
    PERFORM pg_notify('onejob_job_events', r.job_id::text || ':' || r.seq::text);
  END LOOP;
  RETURN NULL;
END $$;

CREATE TRIGGER job_events_notify AFTER INSERT ON job_events
  REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION job_events_notify();

-- Every result that lost the compare-and-swap, with both sides named and the payload kept
-- here (never on the job) for the operator who asks what happened.
CREATE TABLE race_log (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id            uuid NOT NULL REFERENCES jobs (id),
  loser_attempt_id  uuid NOT NULL REFERENCES attempts (id),
  winner_attempt_id uuid REFERENCES attempts (id),
  loser_read_version integer NOT NULL,
  job_version       integer NOT NULL,
  reason            text NOT NULL,
  payload           jsonb,
  at                timestamptz NOT NULL
);

CREATE INDEX race_log_job ON race_log (job_id);
