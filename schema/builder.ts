import SchemaBuilder from '@pothos/core';
import ValidationPlugin from '@pothos/plugin-validation';
import { DomainError } from '../core/errors.ts';
import type { Attempt, JobEvent, JobView } from '../db/rows.ts';
import type { GraphQLContext } from './context.ts';

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  DefaultFieldNullability: false;
  Scalars: {
    JSON: { Input: unknown; Output: unknown };
    DateTime: { Input: Date; Output: Date };
  };
  Objects: {
    Job: JobView;
    Attempt: Attempt;
    JobEvent: JobEvent;
  };
}>({
  plugins: [ValidationPlugin],
  defaultFieldNullability: false,
  validation: {
    // Every validation failure is BAD_USER_INPUT naming the first offending field.
    validationError: (result) => {
      const issue = result.issues[0];
      const field = issue?.path?.map((p) => (typeof p === 'object' ? String(p.key) : String(p))).join('.') ?? '';
      const messages = result.issues.map((i) => {
        const at = i.path?.map((p) => (typeof p === 'object' ? String(p.key) : String(p))).join('.');
        return at ? `${at}: ${i.message}` : i.message;
      });
      return new DomainError('BAD_USER_INPUT', messages.join('; '), { field });
    },
  },
});
