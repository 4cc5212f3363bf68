import type { Caller } from '../core/caller.ts';
import { DomainError } from '../core/errors.ts';

/** cancelAttempt and reportAttemptResult are out-of-band tools for operators (CONTRACT.md section 2). */
export function requireOperator(caller: Caller, what: string): void {
  if (caller.role !== 'operator') {
    throw new DomainError('FORBIDDEN', `${what} is for operators. Use an operator token (onejob token create --role operator).`);
  }
}
