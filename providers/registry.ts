// The configured providers, by name, and what onejob may do with each without a human choosing it.
import type { Config, ProviderConfig } from '../config.ts';
import type { Queryable } from '../db/pool.ts';

export class ProviderRegistry {
  constructor(private readonly config: Config) {}

  names(): string[] {
    return Object.keys(this.config.providers);
  }

  get(name: string): ProviderConfig | undefined {
    return Object.hasOwn(this.config.providers, name) ? this.config.providers[name] : undefined;
  }

  timeoutMs(name: string): number {
    return this.require(name).timeoutMs;
  }

  /** A `manual` provider hands the attempt to a human or an outside system at once: STARTING → RUNNING. */
  dispatchesAtOnce(name: string): boolean {
    return this.require(name).kind === 'manual';
  }

  /**
   * Whether the provider has proven it honours the operation's contract, which automatic failover and
   * a retry onto a fallback require (rules 8, 10). A `manual` provider needs no certificate: every
   * result reported for it is checked against the contract anyway.
   */
  async isCertified(_q: Queryable, provider: string, _operation: string): Promise<boolean> {
    return this.require(provider).kind === 'manual';
  }

  private require(name: string): ProviderConfig {
    const p = this.get(name);
    if (!p) throw new Error(`provider ${name} is not configured`);
    return p;
  }
}
