// The configuration file named by ONEJOB_CONFIG (CONTRACT.md section 6). A bad file stops the service
// at start with a message naming the file and the field.
import { readFileSync } from 'node:fs';
import { z } from 'zod';

export const DEFAULT_PROVIDER_TIMEOUT_MS = 30_000;
/** How long a sender may keep retrying one request; keys live 3 × this (rule 5). */
export const DEFAULT_SENDER_RETRY_WINDOW_SECONDS = 86_400;

const timeoutMs = z.number().int().min(100).max(3_600_000).default(DEFAULT_PROVIDER_TIMEOUT_MS);

const envName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name (A-Z, 0-9, _)');
/** The model's context window in tokens, where the built-in table (providers/tokenizers.ts) does not know it. */
const contextTokens = z.number().int().min(1024).optional();

/**
 * Inbound result webhooks (CONTRACT.md section 8), on every kind of provider. Only a provider with
 * webhookSecretEnv (naming the variable that holds its `whsec_…` secret) accepts POST /webhooks/{name};
 * a delivery's dedup key lives 3 × senderRetryWindowSeconds.
 */
const inboundWebhooks = {
  webhookSecretEnv: envName.optional(),
  senderRetryWindowSeconds: z.number().int().min(1).max(31_536_000).default(DEFAULT_SENDER_RETRY_WINDOW_SECONDS),
};

/** Hands each attempt to a person or an outside system at once and waits for reportAttemptResult. */
const ManualProvider = z.strictObject({ kind: z.literal('manual'), timeoutMs, ...inboundWebhooks });

/** OpenAI Chat Completions with a JSON-schema response format, or the Responses API in background mode. */
const OpenAIProvider = z.strictObject({
  kind: z.literal('openai'),
  baseUrl: z.url(),
  model: z.string().min(1),
  apiKeyEnv: envName.optional(),
  timeoutMs,
  api: z.enum(['chat', 'responses']).default('chat'),
  contextTokens,
  ...inboundWebhooks,
});

/** Anthropic Messages, with structured output through a forced tool call. */
const AnthropicProvider = z.strictObject({
  kind: z.literal('anthropic'),
  baseUrl: z.url().default('https://api.anthropic.com'),
  model: z.string().min(1),
  apiKeyEnv: envName.optional(),
  timeoutMs,
  anthropicVersion: z.string().default('2023-06-01'),
  contextTokens,
  ...inboundWebhooks,
});

export const SIM_BEHAVIOURS = ['ok', 'timeout', 'hallucinated_key', 'broken_json', 'wrong_label', 'refuse', 'fail'] as const;

/** A local simulated model for demos and tests; its behaviour is set here. */
const SimProvider = z.strictObject({
  kind: z.literal('sim'),
  model: z.string().default('sim-1'),
  timeoutMs,
  latencyMs: z.number().int().min(0).max(60_000).default(20),
  behaviour: z.enum(SIM_BEHAVIOURS).default('ok'),
  contextTokens,
  ...inboundWebhooks,
});

export const ProviderConfig = z.discriminatedUnion('kind', [ManualProvider, OpenAIProvider, AnthropicProvider, SimProvider]);
export type ProviderConfig = z.infer<typeof ProviderConfig>;

export const Config = z.strictObject({
  providers: z
    .record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'provider names are 1..64 of A-Z a-z 0-9 _ . -'), ProviderConfig)
    .refine((p) => Object.keys(p).length > 0, 'at least one provider is needed'),
  idempotency: z
    .strictObject({
      senderRetryWindowSeconds: z.number().int().min(1).max(31_536_000).default(DEFAULT_SENDER_RETRY_WINDOW_SECONDS),
    })
    .default({ senderRetryWindowSeconds: DEFAULT_SENDER_RETRY_WINDOW_SECONDS }),
  /**
   * Outcome effects (section 8). senderRetryWindowSeconds: the window over which a receiver should expect
   * retries of one callback; a delivered notification's key is kept 3 × this.
   */
  effects: z
    .strictObject({
      senderRetryWindowSeconds: z.number().int().min(1).max(31_536_000).default(DEFAULT_SENDER_RETRY_WINDOW_SECONDS),
    })
    .default({ senderRetryWindowSeconds: DEFAULT_SENDER_RETRY_WINDOW_SECONDS }),
  /** The sweep that deletes expired deduplication keys: how often, and how many per statement. */
  expiry: z
    .strictObject({
      sweepIntervalSeconds: z.number().int().min(1).max(86_400).default(60),
      batchSize: z.number().int().min(1).max(100_000).default(1_000),
    })
    .default({ sweepIntervalSeconds: 60, batchSize: 1_000 }),
});
export type Config = z.infer<typeof Config>;

export const DEFAULT_CONFIG: Config = Config.parse({
  providers: {
    primary: { kind: 'manual' },
    backup: { kind: 'manual' },
    // The demo pair: a simulated model that never answers, and one that does (certify it to fail over to it).
    'sim-slow': { kind: 'sim', behaviour: 'timeout', timeoutMs: 2_000 },
    'sim-fast': { kind: 'sim', behaviour: 'ok', latencyMs: 150 },
  },
});

export class ConfigError extends Error {}

export function parseConfig(raw: unknown, source: string): Config {
  const parsed = Config.safeParse(raw);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(top level)'}: ${i.message}`);
  throw new ConfigError(`Bad configuration in ${source}:\n${problems.join('\n')}`);
}

/** The file named by ONEJOB_CONFIG, or the built-in defaults. */
export function loadConfig(file = process.env.ONEJOB_CONFIG): Config {
  if (!file) return DEFAULT_CONFIG;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`Cannot read the configuration file ${file} (ONEJOB_CONFIG): ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`The configuration file ${file} is not valid JSON: ${(err as Error).message}`);
  }
  return parseConfig(raw, file);
}
