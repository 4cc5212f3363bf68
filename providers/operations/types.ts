import type { z } from 'zod';

/**
 * An operation is a contract: what goes in, what must come out (strict: no other keys), and the
 * business rule a syntactically valid output must still meet. Every reported result is checked
 * against it before it may win.
 */
export interface Operation<In = unknown, Out = unknown> {
  name: string;
  input: z.ZodType<In>;
  output: z.ZodType<Out>;
  /** Answers why the output breaks the business rule, or undefined when it holds. */
  businessRule(input: In, output: Out): string | undefined;
}
