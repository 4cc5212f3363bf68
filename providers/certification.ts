// Contract certification: runs an operation's fixtures through a provider, full round trip at
// temperature 0, checks every output against the operation's contract (strict shape + business rule),
// and records the run. Automatic failover and retryJob onto a fallback need a passing certification
// under the provider's current model, the operation's prompt version and its output schema's hash.
import { randomUUID } from 'node:crypto';
import type { Core } from '../core/core.ts';
import { recordCertification, type Certification } from '../db/certifications.ts';
import { sleep } from './adapters/http.ts';
import type { CallOutcome } from './adapters/types.ts';
import { OPERATIONS, checkOutput, type Operation } from './operations/index.ts';
import { checkPromptFits } from './tokenizers.ts';

const RETRIEVE_INTERVAL_MS = 200;

export class CertificationError extends Error {}

/** Certifies `provider` for the given operations (default: all); answers one record per operation. */
export async function certifyProvider(core: Core, provider: string, operations?: string[]): Promise<Certification[]> {
  const config = core.providers.get(provider);
  if (!config) throw new CertificationError(`No provider "${provider}". Configured: ${core.providers.names().join(', ')}.`);
  const adapter = core.providers.adapter(provider);
  if (!adapter) throw new CertificationError(`Provider "${provider}" is manual: its results are checked one by one, it needs no certification.`);
  const ops = (operations ?? [...OPERATIONS.keys()]).map((name) => {
    const op = OPERATIONS.get(name);
    if (!op) throw new CertificationError(`No operation "${name}". Known: ${[...OPERATIONS.keys()].join(', ')}.`);
    return op;
  });
  const records: Certification[] = [];
  for (const op of ops) records.push(await certifyOperation(core, provider, op));
  return records;
}

async function certifyOperation(core: Core, provider: string, op: Operation): Promise<Certification> {
  const config = core.providers.get(provider)!;
  const adapter = core.providers.adapter(provider)!;
  if (config.kind === 'manual') throw new CertificationError(`Provider "${provider}" is manual.`);
  const model = core.providers.model(provider);
  const failures: { fixture: string; reason: string }[] = [];
  let promptTokens = 0;
  for (const fixture of op.fixtures) {
    const prompt = op.prompt.render(fixture.input);
    const fits = checkPromptFits(config.kind, model, prompt, op.prompt.maxOutputTokens, config.contextTokens);
    promptTokens += fits.promptTokens;
    if (!fits.ok) {
      failures.push({ fixture: fixture.name, reason: fits.reason });
      continue;
    }
    const signal = AbortSignal.timeout(config.timeoutMs);
    let outcome: CallOutcome = await adapter.call({
      attemptId: `certification-${randomUUID()}`,
      operation: op.name,
      input: fixture.input,
      prompt,
      outputSchema: op.outputJsonSchema(),
      maxOutputTokens: op.prompt.maxOutputTokens,
      signal,
      deadline: new Date(Date.now() + config.timeoutMs),
      onAccepted: async () => {},
    });
    while (outcome.kind === 'pending' && adapter.retrieve && (await sleep(RETRIEVE_INTERVAL_MS, signal))) {
      outcome = await adapter.retrieve({ attemptId: '', providerRequestId: outcome.providerRequestId }, signal);
    }
    if (outcome.kind !== 'result') {
      failures.push({ fixture: fixture.name, reason: outcome.kind === 'pending' ? 'no answer within the timeout' : outcome.reason });
      continue;
    }
    const check = checkOutput(op, fixture.input, outcome.output);
    if (!check.ok) failures.push({ fixture: fixture.name, reason: check.reason });
  }
  return recordCertification(core.pool, {
    provider,
    model,
    operation: op.name,
    templateVersion: op.prompt.version,
    outputSchemaHash: op.outputSchemaHash(),
    passed: failures.length === 0 && op.fixtures.length > 0,
    fixtures: op.fixtures.length,
    failures,
    promptTokens,
    certifiedAt: core.clock.now(),
  });
}
