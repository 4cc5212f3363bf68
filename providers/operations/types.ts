import type { z } from 'zod';
import type { Prompt } from '../adapters/types.ts';

/**
 * An operation is a contract: what goes in, what must come out (strict: no other keys), the business
 * rule a syntactically valid output must still meet, and the versioned prompt that asks a model for it.
 * Every result is checked against output + businessRule before it may win. A certification is valid
 * only for the prompt's version and the output schema's hash it was earned with.
 */
export interface Operation<In = unknown, Out = unknown> {
  name: string;
  input: z.ZodType<In>;
  output: z.ZodType<Out>;
  /** Answers why the output breaks the business rule, or undefined when it holds. */
  businessRule(input: In, output: Out): string | undefined;
  prompt: {
    /** Bump on any change of the template's text: it invalidates every certification. */
    version: string;
    render(input: In): Prompt;
    /** Most tokens the output may need; the prompt must fit the model's context with this much room. */
    maxOutputTokens: number;
  };
  /** Real inputs that certification runs through a provider; each must pass for the provider to pass. */
  fixtures: { name: string; input: In }[];
  /**
   * The output schema as JSON Schema (draft 2020-12, no `$schema`) for structured output: every object has
   * `additionalProperties: false` and lists all its properties in `required` (OpenAI strict mode).
   * A fresh copy on every call. Refinements and the business rule are not in it: checkOutput still decides.
   */
  outputJsonSchema(): Record<string, unknown>;
  /** SHA-256 hex of the canonical JSON (RFC 8785) of outputJsonSchema(): stable across calls and processes. */
  outputSchemaHash(): string;
}
