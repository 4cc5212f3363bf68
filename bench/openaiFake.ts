// Parent side of bench/openaiFakeChild.ts: the local fake OpenAI server in a process of its own, so that
// neither the bench's callers nor the instance share an event loop with it.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ENTRY = fileURLToPath(new URL('./openaiFakeChild.ts', import.meta.url));
const START_TIMEOUT_MS = 30_000;

export interface FakeProcess {
  /** http://127.0.0.1:PORT/v1 */
  baseUrl: string;
  /** Requests the fake received since the last call, by how it answered them (its `answer` field; "ok" is a good answer). */
  requests(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** Parent side: starts the fake in a child process with this API key. */
export async function startFakeProcess(apiKey: string): Promise<FakeProcess> {
  const child: ChildProcess = fork(ENTRY, [], {
    env: { ...process.env, BENCH_FAKE_OPENAI_KEY: apiKey },
    execArgv: process.execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<string, (body: any) => void>();
  let exited = false;
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the fake OpenAI server did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    child.on('message', (msg: any) => {
      if (msg?.type === 'ready') {
        clearTimeout(timer);
        return resolve(msg.baseUrl);
      }
      waiting.get(msg?.type)?.(msg.body);
      waiting.delete(msg?.type);
    });
    child.once('exit', (code) => {
      exited = true;
      clearTimeout(timer);
      reject(new Error(`the fake OpenAI server exited with code ${code}`));
    });
  });
  const ask = <T>(type: string) =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error('the fake OpenAI server has exited'));
      const timer = setTimeout(() => reject(new Error(`the fake OpenAI server did not answer ${type}`)), 10_000);
      waiting.set(type, (body) => (clearTimeout(timer), resolve(body as T)));
      child.send({ type });
    });
  let stopping: Promise<void> | undefined;
  return {
    baseUrl,
    requests: () => ask<Record<string, number>>('requests'),
    stop: () =>
      (stopping ??= (async () => {
        if (exited) return;
        const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await ask('stop').catch(() => {});
        await gone;
        clearTimeout(timer);
      })()),
  };
}
