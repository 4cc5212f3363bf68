import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import { z } from 'zod';

// The package is CommonJS (module.exports = fn) but its typings declare a default export.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

export type JsonSchema = Record<string, unknown>;

/**
 * The zod schema as JSON Schema (draft 2020-12, without `$schema`) for strict structured output, as
 * OpenAI's strict mode demands: every object has `additionalProperties: false` and lists all of its
 * properties in `required`. Throws when the zod schema cannot be said that way: a plain `z.object` (it
 * would strip unknown keys, not refuse them, so the contract would not be strict), an optional or
 * defaulted property, or a type JSON Schema cannot express.
 *
 * It converts in `io: 'input'` mode on purpose: that is what the validator accepts, and in `output` mode
 * zod writes `additionalProperties: false` even for a plain `z.object`, which hides a non-strict contract.
 * Refinements (e.g. "labels distinct") are not expressible and are silently left out by zod.
 */
export function strictJsonSchema(schema: z.ZodType, what = 'schema'): JsonSchema {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'throw' }) as JsonSchema;
  delete json.$schema;
  assertStrict(json, what);
  return json;
}

function assertStrict(node: unknown, at: string): void {
  if (Array.isArray(node)) {
    node.forEach((child, i) => assertStrict(child, `${at}[${i}]`));
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const o = node as Record<string, unknown>;
  const isObject = o.type === 'object' || (Array.isArray(o.type) && o.type.includes('object')) || 'properties' in o;
  if (isObject) {
    if (o.additionalProperties !== false) throw new Error(`${at}: object is not strict (additionalProperties must be false)`);
    const keys = Object.keys((o.properties as Record<string, unknown> | undefined) ?? {});
    const required = new Set((o.required as string[] | undefined) ?? []);
    const optional = keys.filter((k) => !required.has(k));
    if (optional.length) throw new Error(`${at}: properties ${optional.join(', ')} are not required (strict structured output needs all)`);
  }
  for (const [key, child] of Object.entries(o)) {
    // `properties` maps names to schemas; every other object-valued keyword holds schemas (or is inert).
    if (key === 'properties' && child && typeof child === 'object') {
      for (const [name, prop] of Object.entries(child)) assertStrict(prop, `${at}.${name}`);
    } else if (key !== 'required' && key !== 'enum' && key !== 'const' && key !== 'default' && key !== 'examples') {
      assertStrict(child, `${at}.${key}`);
    }
  }
}

/** SHA-256 hex of the canonical JSON (RFC 8785: keys sorted, numbers normalised) of a JSON Schema. */
export function jsonSchemaHash(schema: JsonSchema): string {
  return createHash('sha256').update(canonicalize(schema)!).digest('hex');
}
