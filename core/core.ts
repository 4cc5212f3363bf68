import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Pool } from '../db/pool.ts';
import type { ProviderRegistry } from '../providers/registry.ts';

/** What every domain function needs: the database, time, configuration, providers and a log. */
export interface Core {
  pool: Pool;
  clock: Clock;
  config: Config;
  providers: ProviderRegistry;
  log: Logger;
}
