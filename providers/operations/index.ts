import type { z } from 'zod';
import { classify } from './classify.ts';
import { summarize } from './summarize.ts';
import type { Operation } from './types.ts';

export type { Operation } from './types.ts';

/** The registered operations. Adding one: a module like summarize.ts, then one line here. */
export const OPERATIONS: ReadonlyMap<string, Operation> = new Map(
  [summarize, classify].map((op) => [op.name, op as Operation]),
);

export type ContractCheck = { ok: true; output: unknown } | { ok: false; reason: string };

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : '(top level)'}: ${i.message}`)
    .join('; ');
}

/** Checks a reported result against the operation's output contract: strict shape, then business rule. */
export function checkOutput(op: Operation, input: unknown, result: unknown): ContractCheck {
  const shape = op.output.safeParse(result);
  if (!shape.success) return { ok: false, reason: `output breaks the ${op.name} contract: ${describeIssues(shape.error)}` };
  const broken = op.businessRule(input, shape.data);
  if (broken) return { ok: false, reason: `output breaks the ${op.name} business rule: ${broken}` };
  return { ok: true, output: shape.data };
}

export type InputCheck = { ok: true } | { ok: false; field: string; reason: string };

export function checkInput(op: Operation, input: unknown): InputCheck {
  const parsed = op.input.safeParse(input);
  if (parsed.success) return { ok: true };
  const first = parsed.error.issues[0]!;
  return { ok: false, field: ['input', 'input', ...first.path].join('.'), reason: describeIssues(parsed.error) };
}
