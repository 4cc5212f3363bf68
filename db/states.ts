// The attempt state machine, written once. db/migrations/0001_init.sql mirrors ATTEMPT_TRANSITIONS in
// the attempt_transitions table and refuses any other move by trigger; test/states.test.ts checks
// that the two agree.

export const ATTEMPT_STATES = [
  // Created, being dispatched. Left by: the provider accepting (RUNNING), a definitive refusal
  // (FAILED), the deadline (UNKNOWN), a cancel (CANCELLED), or a reported result.
  'STARTING',
  // The provider has it. Left by: a result (SUCCEEDED or DISCARDED), a definitive failure (FAILED),
  // the deadline (UNKNOWN), a cancel.
  'RUNNING',
  // Nobody knows whether the provider did the work. Blocks new attempts. Left only by a result or
  // error arriving (report, webhook, reconciliation) or an operator's cancel — never by time.
  'UNKNOWN',
  // Final: this attempt's result won the compare-and-swap.
  'SUCCEEDED',
  // Final: a definitive failure.
  'FAILED',
  // Resolved out of band; no longer blocks. Left by a late result (SUCCEEDED if it still wins the
  // swap, else DISCARDED) or a late error (FAILED).
  'CANCELLED',
  // Final: a result that arrived after another had won or the job was cancelled.
  'DISCARDED',
] as const;

export type AttemptState = (typeof ATTEMPT_STATES)[number];

export const LIVE_ATTEMPT_STATES = ['STARTING', 'RUNNING', 'UNKNOWN'] as const satisfies readonly AttemptState[];
export const FINAL_ATTEMPT_STATES = ['SUCCEEDED', 'FAILED', 'DISCARDED'] as const satisfies readonly AttemptState[];

export const ATTEMPT_TRANSITIONS: Readonly<Record<AttemptState, readonly AttemptState[]>> = {
  STARTING: ['RUNNING', 'UNKNOWN', 'FAILED', 'CANCELLED', 'SUCCEEDED', 'DISCARDED'],
  RUNNING: ['UNKNOWN', 'FAILED', 'CANCELLED', 'SUCCEEDED', 'DISCARDED'],
  UNKNOWN: ['FAILED', 'CANCELLED', 'SUCCEEDED', 'DISCARDED'],
  CANCELLED: ['FAILED', 'SUCCEEDED', 'DISCARDED'],
  SUCCEEDED: [],
  FAILED: [],
  DISCARDED: [],
};

/** The states an attempt may be in for a move to `to` to be allowed: the WHERE of every state UPDATE. */
export function statesThatMayMoveTo(to: AttemptState): AttemptState[] {
  return ATTEMPT_STATES.filter((from) => ATTEMPT_TRANSITIONS[from].includes(to));
}

export function isLive(state: AttemptState): boolean {
  return (LIVE_ATTEMPT_STATES as readonly AttemptState[]).includes(state);
}

export function isFinal(state: AttemptState): boolean {
  return (FINAL_ATTEMPT_STATES as readonly AttemptState[]).includes(state);
}

export const JOB_STATUSES = ['PENDING', 'RUNNING', 'UNKNOWN', 'SUCCEEDED', 'FAILED', 'CANCELLED'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const JOB_EVENT_TYPES = [
  'JOB_CREATED', 'ATTEMPT_STARTED', 'ATTEMPT_RUNNING', 'ATTEMPT_UNKNOWN', 'ATTEMPT_SUCCEEDED',
  'ATTEMPT_FAILED', 'ATTEMPT_CANCELLED', 'ATTEMPT_DISCARDED', 'FALLBACK_BLOCKED',
  'JOB_SUCCEEDED', 'JOB_FAILED', 'JOB_CANCELLED',
] as const;
export type JobEventType = (typeof JOB_EVENT_TYPES)[number];
