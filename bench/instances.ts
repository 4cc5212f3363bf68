// Parent side of bench/instance.ts: starts an instance in a child process and talks to it.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ProfileSummary } from './profile.ts';
import type { InstanceStats } from './instance.ts';
import type { QueryCounts } from './queryCounter.ts';

const ENTRY = fileURLToPath(new URL('./instance.ts', import.meta.url));
const START_TIMEOUT_MS = 60_000;
const CALL_TIMEOUT_MS = 30_000;

export interface RunningInstance {
  url: string;
  graphqlUrl: string;
  pid: number;
  stats(): Promise<InstanceStats>;
  /** Statements sent so far by its pool; only for an instance started with countQueries. */
  queryCounts(): Promise<QueryCounts>;
  profileStart(): Promise<void>;
  profileStop(): Promise<ProfileSummary>;
  stop(): Promise<void>;
}

export interface InstanceOptions {
  /** The instance's configuration (parsed by config.ts Config); default bench/config.ts BENCH_CONFIG. */
  config?: unknown;
  /** Count the statements its pool sends (bench/queryCounter.ts). */
  countQueries?: boolean;
  /** More environment variables for the child (e.g. a provider's API key variable). */
  env?: Record<string, string>;
}

export async function startInstance(databaseUrl: string, label: string, options: InstanceOptions = {}): Promise<RunningInstance> {
  // process.execArgv carries tsx's loader flags, so the child runs TypeScript like this process.
  const child: ChildProcess = fork(ENTRY, [], {
    env: {
      ...process.env,
      ...options.env,
      BENCH_DATABASE_URL: databaseUrl,
      LOG_LEVEL: 'silent',
      // Set here or not at all (an undefined value is left out of the child's environment).
      BENCH_INSTANCE_CONFIG: options.config === undefined ? undefined : JSON.stringify(options.config),
      BENCH_COUNT_QUERIES: options.countQueries ? '1' : undefined,
    },
    execArgv: process.execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve(v: any): void; reject(e: Error): void }>();
  let exited = false;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`instance ${label} did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    child.on('message', (msg: any) => {
      if (msg?.type === 'ready') {
        clearTimeout(timer);
        resolve(msg.url);
        return;
      }
      const p = pending.get(msg?.id);
      if (!p) return;
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`instance ${label}: ${msg.error}`));
      else p.resolve(msg.body);
    });
    child.once('exit', (code) => {
      exited = true;
      clearTimeout(timer);
      reject(new Error(`instance ${label} exited with code ${code} before it was ready`));
      for (const p of pending.values()) p.reject(new Error(`instance ${label} exited (code ${code})`));
      pending.clear();
    });
  });
  const call = <T>(type: string): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error(`instance ${label} has exited`));
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`instance ${label}: ${type} timed out`));
      }, CALL_TIMEOUT_MS);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      child.send({ id, type });
    });
  let stopping: Promise<void> | undefined;
  return {
    url,
    graphqlUrl: `${url}/graphql`,
    pid: child.pid!,
    stats: () => call<InstanceStats>('stats'),
    queryCounts: () => call<QueryCounts>('query-counts'),
    profileStart: () => call<void>('profile-start'),
    profileStop: () => call<ProfileSummary>('profile-stop'),
    stop() {
      stopping ??= (async () => {
        if (exited) return;
        const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        await call<void>('stop').catch(() => {});
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await gone;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}
