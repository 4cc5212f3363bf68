// The GraphQL documents clients send, shared by the tests and the bench (no test runner imported here).
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

export const SUMMARY_TEXT = 'The quick brown fox jumps over the lazy dog, again and again, all day long.';

export const summarizeInput = (key: string, extra: Record<string, unknown> = {}) => ({
  idempotencyKey: key,
  operation: 'summarize',
  provider: 'primary',
  fallbackProviders: ['backup'],
  input: { text: SUMMARY_TEXT },
  ...extra,
});

export const GOOD_SUMMARY = { summary: 'A fox jumps.', keyPoints: ['fox', 'dog'] };

export const JOB_EVENTS = /* GraphQL */ `
  subscription Events($jobId: ID!, $afterSeq: Int) {
    jobEvents(jobId: $jobId, afterSeq: $afterSeq) { seq type jobId jobStatus attemptId attemptNumber attemptState provider message at }
  }`;
