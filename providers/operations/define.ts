import { jsonSchemaHash, strictJsonSchema } from './jsonSchema.ts';
import type { Operation } from './types.ts';

/** An operation as its module writes it: everything but what is derived from the output schema. */
export type OperationSpec<In, Out> = Omit<Operation<In, Out>, 'outputJsonSchema' | 'outputSchemaHash'>;

/**
 * Completes an operation: derives its output JSON Schema (checked strict, see strictJsonSchema) and that
 * schema's hash once, at definition time, so a non-strict output contract fails at import, not in a call.
 * outputJsonSchema() hands out a fresh copy each time: an adapter may change its copy without harm.
 */
export function defineOperation<In, Out>(spec: OperationSpec<In, Out>): Operation<In, Out> {
  const schema = strictJsonSchema(spec.output, `${spec.name} output`);
  const hash = jsonSchemaHash(schema);
  return { ...spec, outputJsonSchema: () => structuredClone(schema), outputSchemaHash: () => hash };
}
