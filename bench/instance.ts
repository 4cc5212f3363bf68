// One onejob instance in its own process, as `npm start` would run it: buildApp on 127.0.0.1, port 0,
// silent logs. The bench (the parent) drives it over IPC: it answers its URL, CPU time, pool state,
// subscriber count, and can profile itself for a window. BENCH_INSTANCE_CONFIG (JSON) replaces the
// default bench configuration; BENCH_COUNT_QUERIES=1 counts the statements its pool sends (queryCounter.ts).
import { Session } from 'node:inspector';
import { buildApp } from '../app.ts';
import { Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { BENCH_CONFIG } from './config.ts';
import { summarizeProfile, type CpuProfile } from './profile.ts';
import { countPoolQueries, type QueryCounts } from './queryCounter.ts';

export type ToInstance =
  | { id: number; type: 'stats' }
  | { id: number; type: 'profile-start' }
  | { id: number; type: 'profile-stop' }
  | { id: number; type: 'query-counts' }
  | { id: number; type: 'stop' };

export interface InstanceStats {
  cpuUs: number;
  pool: { total: number; idle: number; waiting: number; max: number };
  subscribers: number;
}

async function main(): Promise<void> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl || !process.send) throw new Error('bench/instance.ts is started by bench/index.ts');
  const configJson = process.env.BENCH_INSTANCE_CONFIG;
  const config = configJson ? Config.parse(JSON.parse(configJson)) : BENCH_CONFIG;
  const app = buildApp({ config, databaseUrl, log: createLogger('silent') });
  // Hooked before the app opens its first connection, so every pooled client is seen.
  const counter = process.env.BENCH_COUNT_QUERIES === '1' ? countPoolQueries(app.core.pool) : undefined;
  const url = await app.start(0, '127.0.0.1');
  const session = new Session();
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) => session.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));

  const reply = (id: number, body: unknown) => process.send!({ id, body });
  process.on('message', async (msg: ToInstance) => {
    try {
      switch (msg.type) {
        case 'stats': {
          const cpu = process.cpuUsage();
          const pool = app.core.pool;
          const stats: InstanceStats = {
            cpuUs: cpu.user + cpu.system,
            pool: { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max },
            subscribers: app.hub.subscriberCount(),
          };
          return reply(msg.id, stats);
        }
        case 'query-counts': {
          if (!counter) throw new Error('statement counting is off (start the instance with BENCH_COUNT_QUERIES=1)');
          const counts: QueryCounts = counter.snapshot();
          return reply(msg.id, counts);
        }
        case 'profile-start':
          session.connect();
          await post('Profiler.enable');
          await post('Profiler.setSamplingInterval', { interval: 500 });
          await post('Profiler.start');
          return reply(msg.id, null);
        case 'profile-stop': {
          const { profile } = (await post('Profiler.stop')) as { profile: CpuProfile };
          session.disconnect();
          return reply(msg.id, summarizeProfile(profile));
        }
        case 'stop':
          await app.stop();
          reply(msg.id, null);
          return process.disconnect();
      }
    } catch (err) {
      process.send!({ id: msg.id, error: String((err as Error)?.stack ?? err) });
    }
  });
  // The parent went away (crash or Ctrl-C): do not linger.
  process.on('disconnect', () => {
    setTimeout(() => process.exit(0), 2_000).unref();
    void app.stop().finally(() => process.exit(0));
  });
  process.send({ type: 'ready', url });
}

main().catch((err) => {
  process.stderr.write(`bench instance failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
