// One onejob instance in its own process, as `npm start` would run it: buildApp on 127.0.0.1, port 0,
// silent logs. The bench (the parent) drives it over IPC: it answers its URL, CPU time, pool state,
// subscriber count, and can profile itself for a window.
import { Session } from 'node:inspector';
import { buildApp } from '../app.ts';
import { createLogger } from '../log.ts';
import { BENCH_CONFIG } from './config.ts';
import { summarizeProfile, type CpuProfile } from './profile.ts';

export type ToInstance =
  | { id: number; type: 'stats' }
  | { id: number; type: 'profile-start' }
  | { id: number; type: 'profile-stop' }
  | { id: number; type: 'stop' };

export interface InstanceStats {
  cpuUs: number;
  pool: { total: number; idle: number; waiting: number; max: number };
  subscribers: number;
}

async function main(): Promise<void> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl || !process.send) throw new Error('bench/instance.ts is started by bench/index.ts');
  const app = buildApp({ config: BENCH_CONFIG, databaseUrl, log: createLogger('silent') });
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
