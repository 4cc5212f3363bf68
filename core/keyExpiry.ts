// Deliberate expiry of the deduplication stores: a sweeper deletes expired keys in bounded batches, so
// a large backlog never becomes one long transaction that holds locks against createJob, and reports
// each store's size as a metric.
import { Counter, Gauge, type Registry } from 'prom-client';
import { KEY_STORES, countKeys, deleteExpiredKeys, type KeyStore } from '../db/keyStores.ts';
import type { Core } from './core.ts';
import { runPeriodically, type Periodic } from './periodic.ts';

export interface KeyExpiryOptions {
  intervalMs: number;
  batchSize: number;
  /** Batches per store per pass: bounds one pass; the rest waits for the next. */
  maxBatchesPerPass: number;
}

export const DEFAULT_KEY_EXPIRY: KeyExpiryOptions = { intervalMs: 60_000, batchSize: 1_000, maxBatchesPerPass: 50 };

export interface KeyExpiryMetrics {
  size: Gauge<'store'>;
  removed: Counter<'store'>;
}

export function keyExpiryMetrics(registry: Registry): KeyExpiryMetrics {
  return {
    size: new Gauge({ name: 'onejob_dedup_keys', help: 'Keys held by each deduplication store', labelNames: ['store'], registers: [registry] }),
    removed: new Counter({
      name: 'onejob_dedup_keys_expired_total',
      help: 'Expired keys deleted from each deduplication store',
      labelNames: ['store'],
      registers: [registry],
    }),
  };
}

export interface SweepReport {
  removed: Record<KeyStore, number>;
  batches: Record<KeyStore, number>;
}

/** One pass over every store; answers what it removed, batch by batch. */
export async function sweepExpiredKeys(core: Core, options: KeyExpiryOptions, metrics?: KeyExpiryMetrics): Promise<SweepReport> {
  const report = { removed: {}, batches: {} } as SweepReport;
  for (const store of Object.keys(KEY_STORES) as KeyStore[]) {
    report.removed[store] = 0;
    report.batches[store] = 0;
    const now = core.clock.now();
    for (let batch = 0; batch < options.maxBatchesPerPass; batch++) {
      const removed = await deleteExpiredKeys(core.pool, store, now, options.batchSize);
      if (removed > 0) report.batches[store]++;
      report.removed[store] += removed;
      if (removed < options.batchSize) break;
    }
    metrics?.removed.inc({ store }, report.removed[store]);
    metrics?.size.set({ store }, await countKeys(core.pool, store));
  }
  return report;
}

export function startKeyExpirySweeper(core: Core, options: KeyExpiryOptions, metrics: KeyExpiryMetrics): Periodic {
  return runPeriodically('expiring deduplication keys', options.intervalMs, () => sweepExpiredKeys(core, options, metrics), core.log, {
    immediately: true,
  });
}
