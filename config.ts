// The configuration file named by ONEJOB_CONFIG (CONTRACT.md section 6). A bad file stops the service
// at start with a message naming the file and the field.
import { readFileSync } from 'node:fs';
import { z } from 'zod';

export const DEFAULT_PROVIDER_TIMEOUT_MS = 30_000;
/** How long a sender may keep retrying one request; keys live 3 × this (rule 5). */
export const DEFAULT_SENDER_RETRY_WINDOW_SECONDS = 86_400;

const timeoutMs = z.number().int().min(100).max(3_600_000).default(DEFAULT_PROVIDER_TIMEOUT_MS);

const ManualProvider = z.strictObject({ kind: z.literal('manual'), timeoutMs });

export const ProviderConfig = z.discriminatedUnion('kind', [ManualProvider]);
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
});
export type Config = z.infer<typeof Config>;

export const DEFAULT_CONFIG: Config = Config.parse({
  providers: {
    primary: { kind: 'manual' },
    backup: { kind: 'manual' },
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
