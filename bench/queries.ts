// The documents the bench sends: the same selections and inputs the tests use.
export {
  CANCEL_ATTEMPT, CREATE_JOB, GOOD_SUMMARY, JOB_EVENTS, REPORT, RETRY_JOB, SUMMARY_TEXT, summarizeInput,
} from '../test/helpers/documents.ts';
