// What OpenAI's two endpoints (Chat Completions, Responses) share in the fake: the error body
// `{ error: { message, type, param, code } }` with the type/code OpenAI uses for each status, and the
// request checks the real API makes before any work (so an adapter that sends a schema OpenAI would
// reject fails here too, instead of passing in CI and failing in production).
import type { Exchange } from './server.ts';
import { retryAfterHeader, sendJson, sendRaw } from './server.ts';
import type { TransportBehaviour } from './script.ts';

type StatusBehaviour = Extract<TransportBehaviour, { kind: 'status' }>;

/** OpenAI's usual error type, code and message per HTTP status. */
function defaultsFor(status: number): { type: string; code: string | null; message: string } {
  if (status === 401) return { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' };
  if (status === 404) return { type: 'invalid_request_error', code: null, message: 'The requested resource does not exist.' };
  if (status === 429) {
    return { type: 'requests', code: 'rate_limit_exceeded', message: 'Rate limit reached for requests. Please try again in 1s.' };
  }
  if (status === 503) return { type: 'server_error', code: null, message: 'The engine is currently overloaded, please try again later.' };
  if (status >= 500) {
    return { type: 'server_error', code: null, message: 'The server had an error while processing your request. Sorry about that!' };
  }
  return { type: 'invalid_request_error', code: null, message: 'Invalid request.' };
}

export function sendOpenAIError(
  ex: Exchange,
  status: number,
  override: { message?: string; type?: string; code?: string | null; param?: string | null } = {},
  headers: Record<string, string> = {},
): void {
  const d = defaultsFor(status);
  const error = {
    message: override.message ?? d.message,
    type: override.type ?? d.type,
    param: override.param ?? null,
    code: override.code === undefined ? d.code : override.code,
  };
  sendJson(ex, status, { error }, { 'x-request-id': `req_${ex.record.seq}`, ...headers });
}

/** Renders a scripted `status` behaviour. */
export function sendScriptedOpenAIError(ex: Exchange, b: StatusBehaviour): void {
  if (b.rawBody !== undefined) return sendRaw(ex, b.status, b.rawBody, retryAfterHeader(b));
  sendOpenAIError(ex, b.status, b, retryAfterHeader(b));
}

/** Answers 401 as OpenAI does unless `Authorization: Bearer <apiKey>`; returns whether it passed. */
export function checkBearer(ex: Exchange, apiKey: string): boolean {
  const header = ex.req.headers.authorization;
  if (header === `Bearer ${apiKey}`) return true;
  ex.record.answer = 'unauthorized';
  const message = header
    ? 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.'
    : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
  sendOpenAIError(ex, 401, { message, code: header ? 'invalid_api_key' : null });
  return false;
}

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Why a strict json_schema would be refused: with `strict: true` every object must set
 * `additionalProperties: false` and list every property in `required` (OpenAI's Structured Outputs rule).
 */
export function strictSchemaProblem(schema: unknown, context = '()'): string | undefined {
  if (!isRecord(schema)) return undefined;
  if (schema.type === 'object' || isRecord(schema.properties)) {
    if (schema.additionalProperties !== false) {
      return `In context=${context}, 'additionalProperties' is required to be supplied and to be false.`;
    }
    const props = isRecord(schema.properties) ? Object.keys(schema.properties) : [];
    const required = Array.isArray(schema.required) ? schema.required : [];
    const missing = props.find((p) => !required.includes(p));
    if (missing !== undefined) {
      return `In context=${context}, 'required' is required to be supplied and to be an array including every key in properties. Missing '${missing}'.`;
    }
    for (const p of props) {
      const problem = strictSchemaProblem((schema.properties as Record<string, unknown>)[p], `('properties', '${p}')`);
      if (problem) return problem;
    }
  }
  for (const nested of [schema.items, ...(Array.isArray(schema.anyOf) ? schema.anyOf : [])]) {
    const problem = strictSchemaProblem(nested, `${context}, 'items'`);
    if (problem) return problem;
  }
  return undefined;
}

/** Why a json_schema format ({ name, schema, strict }) would be refused, if it would. */
export function jsonSchemaFormatProblem(format: Record<string, unknown>, where: string): string | undefined {
  if (typeof format.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(format.name)) {
    return `Invalid '${where}.name': must be 1-64 characters of a-z, A-Z, 0-9, underscores and dashes.`;
  }
  if (!isRecord(format.schema)) return `Missing required parameter: '${where}.schema'.`;
  if (format.strict === true) {
    const problem = strictSchemaProblem(format.schema);
    if (problem) return `Invalid schema for response_format '${format.name}': ${problem}`;
  }
  return undefined;
}

/** Why a sampling temperature or token limit would be refused, if it would. */
export function numberProblem(body: Record<string, unknown>, field: string, min: number, max: number, integer = false): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || v < min || v > max || (integer && !Number.isInteger(v))) {
    return `Invalid '${field}': expected ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got ${JSON.stringify(v)}.`;
  }
  return undefined;
}

/** Seconds since the epoch, as OpenAI's `created`/`created_at` fields give time. */
export const unixSeconds = () => Math.floor(Date.now() / 1000);
