import { GraphQLError, Kind, type ValueNode } from 'graphql';
import { builder } from './builder.ts';

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
  parseValue: (v) => v,
  parseLiteral: (node, variables) => literalToValue(node, variables),
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
