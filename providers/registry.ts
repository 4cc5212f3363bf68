// The configured providers, by name: their adapters, and what onejob may do with each without a
// human choosing it.
import type { Config, ProviderConfig } from '../config.ts';
import { findCurrentCertification, type Certification, type CertificationTerms } from '../db/certifications.ts';
import type { Queryable } from '../db/pool.ts';
import { anthropicAdapter } from './adapters/anthropic.ts';
import { openaiAdapter } from './adapters/openai.ts';
import { simAdapter } from './adapters/sim.ts';
import type { ProviderAdapter } from './adapters/types.ts';
import { OPERATIONS } from './operations/index.ts';

function buildAdapter(p: ProviderConfig): ProviderAdapter | undefined {
  switch (p.kind) {
    case 'openai':
      return openaiAdapter(p);
    case 'anthropic':
      return anthropicAdapter(p);
    case 'sim':
      return simAdapter(p);
    case 'manual':
      return undefined;
  }
}

export class ProviderRegistry {
  private readonly adapters = new Map<string, ProviderAdapter>();

  constructor(private readonly config: Config) {
    for (const [name, p] of Object.entries(config.providers)) {
      const adapter = buildAdapter(p);
      if (adapter) this.adapters.set(name, adapter);
    }
  }

  names(): string[] {
    return Object.keys(this.config.providers);
  }

  get(name: string): ProviderConfig | undefined {
    return Object.hasOwn(this.config.providers, name) ? this.config.providers[name] : undefined;
  }

  timeoutMs(name: string): number {
    return this.require(name).timeoutMs;
  }

  /** The model a provider runs ('manual' for a manual provider): certifications are per model. */
  model(name: string): string {
    const p = this.require(name);
    return 'model' in p ? p.model : 'manual';
  }

  /** The adapter that calls the provider; undefined for `manual`, which is never called. */
  adapter(name: string): ProviderAdapter | undefined {
    return this.adapters.get(name);
  }

  /** A `manual` provider hands the attempt to a human or an outside system at once: STARTING → RUNNING. */
  dispatchesAtOnce(name: string): boolean {
    return this.require(name).kind === 'manual';
  }

  /**
   * Whether the provider has proven it honours the operation's contract, which automatic failover and
   * a retry onto a fallback require (rules 8, 10): its newest certification under the current model,
   * prompt version and output schema passed. A `manual` provider needs none: every result reported for
   * it is checked against the contract anyway.
   */
  async isCertified(q: Queryable, provider: string, operation: string): Promise<boolean> {
    if (this.require(provider).kind === 'manual') return true;
    return (await this.currentCertification(q, provider, operation))?.passed === true;
  }

  /**
   * What a certification must have been earned with to count now: the provider's current model, the
   * operation's current prompt version and output schema hash. Undefined for an unknown operation.
   */
  certificationTerms(provider: string, operation: string): CertificationTerms | undefined {
    const op = OPERATIONS.get(operation);
    if (!op) return undefined;
    return { provider, operation, model: this.model(provider), templateVersion: op.prompt.version, outputSchemaHash: op.outputSchemaHash() };
  }

  /** The newest certification earned under the current terms, passed or not. */
  async currentCertification(q: Queryable, provider: string, operation: string): Promise<Certification | undefined> {
    const terms = this.certificationTerms(provider, operation);
    return terms ? findCurrentCertification(q, terms) : undefined;
  }

  private require(name: string): ProviderConfig {
    const p = this.get(name);
    if (!p) throw new Error(`provider ${name} is not configured`);
    return p;
  }
}
