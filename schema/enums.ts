import { ATTEMPT_STATES, JOB_EVENT_TYPES, JOB_STATUSES } from '../db/states.ts';
import { builder } from './builder.ts';

export const JobStatusEnum = builder.enumType('JobStatus', { values: JOB_STATUSES });
export const AttemptStateEnum = builder.enumType('AttemptState', { values: ATTEMPT_STATES });
export const ReportOutcomeEnum = builder.enumType('ReportOutcome', { values: ['WON', 'DISCARDED', 'FAILED'] as const });
export const JobEventTypeEnum = builder.enumType('JobEventType', { values: JOB_EVENT_TYPES });
