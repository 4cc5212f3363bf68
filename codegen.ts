// Writes schema.graphql, the committed SDL of the public API, from the Pothos schema.
// `npm run codegen:check` fails when the committed file is stale (CI runs it).
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  schema: './schema/index.ts',
  generates: {
    'schema.graphql': { plugins: ['schema-ast'], config: { includeDirectives: false, commentDescriptions: false } },
  },
};

export default config;
