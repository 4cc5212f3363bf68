import { GraphQLError, Kind, type ValueNode } from 'graphql';
import { builder } from './builder.ts';

const NUL = /\u0000/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why Postgres could not store this text as sent: text and jsonb refuse U+0000, and an unpaired UTF-16
 * surrogate is silently turned into U+FFFD on the way. Either is the client's input at fault.
 */
export function textProblem(text: string): string | undefined {
  if (NUL.test(text)) return 'must not contain the NUL character (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'must be well-formed Unicode (it contains an unpaired surrogate)';
  return undefined;
}

/** The first string (value or key) in a JSON value that textProblem refuses, with its path; iterative, so depth is no risk. */
export function jsonTextProblem(value: unknown): string | undefined {
  type Item = { value: unknown; key?: string; parent?: Item };
  const pathOf = (item: Item) => {
    const keys: string[] = [];
    for (let i: Item | undefined = item; i?.key !== undefined; i = i.parent) keys.push(i.key);
    return keys.length ? keys.reverse().join('.') : '(top level)';
  };
  const stack: Item[] = [{ value }];
  while (stack.length) {
    const item = stack.pop()!;
    const v = item.value;
    if (typeof v === 'string') {
      const problem = textProblem(v);
      if (problem) return `${pathOf(item)}: ${problem}`;
    } else if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push({ value: x, key: String(i), parent: item }));
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        const problem = textProblem(k);
        if (problem) return `${pathOf(item)}: a key ${problem}`;
        stack.push({ value: x, key: k, parent: item });
      }
    }
  }
  return undefined;
}

function storableJson(value: unknown): unknown {
  const problem = jsonTextProblem(value);
  if (problem) throw new GraphQLError(`JSON cannot be stored: ${problem}`, { extensions: { code: 'BAD_USER_INPUT' } });
  return value;
}

function literalToValue(node: ValueNode, variables: Record<string, unknown> | null | undefined): unknown {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map((v) => literalToValue(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literalToValue(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[node.name.value];
    default:
      throw new GraphQLError('JSON cannot represent this value', { extensions: { code: 'BAD_USER_INPUT' } });
  }
}

builder.scalarType('JSON', {
  description: 'Any JSON value.',
  serialize: (v) => v,
  parseValue: (v) => storableJson(v),
  parseLiteral: (node, variables) => storableJson(literalToValue(node, variables)),
});

builder.scalarType('DateTime', {
  description: 'An ISO 8601 date-time string in UTC.',
  serialize: (v) => (v instanceof Date ? v : new Date(v as string)).toISOString(),
  parseValue: (v) => {
    const d = new Date(v as string);
    if (typeof v !== 'string' || Number.isNaN(d.getTime())) {
      throw new GraphQLError('DateTime must be an ISO 8601 string', { extensions: { code: 'BAD_USER_INPUT' } });
    }
    return d;
  },
});
