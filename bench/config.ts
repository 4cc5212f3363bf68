import { Config } from '../config.ts';

/** Manual providers with the longest allowed timeout: no attempt the bench starts falls due while it runs. */
export const BENCH_CONFIG: Config = Config.parse({
  providers: {
    primary: { kind: 'manual', timeoutMs: 3_600_000 },
    backup: { kind: 'manual', timeoutMs: 3_600_000 },
  },
});
