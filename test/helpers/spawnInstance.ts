import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import type { Config } from '../../config.ts';

/** Starts an instance in a child process; answers its URL and a way to kill it without warning. */
export async function spawnInstance(databaseUrl: string, config: Config): Promise<{ url: string; graphqlUrl: string; kill(): Promise<void> }> {
  const configFile = path.join(mkdtempSync(path.join(tmpdir(), 'onejob-child-')), 'config.json');
  writeFileSync(configFile, JSON.stringify(config));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/childInstance.ts'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, ONEJOB_CONFIG: configFile },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  afterAll(kill);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`child instance exited with ${code} before serving`)));
  });
  return { url, graphqlUrl: `${url}/graphql`, kill };
}
