// The fake OpenAI-compatible server of the tests (test/fakes/openaiFake.ts: node:http only, no test
// runner) in its own process, started by bench/openaiFake.ts. It answers every well-formed request with a
// good result at once; the parent asks it over IPC how many requests it answered, and how.
import { startOpenAIFake } from '../test/fakes/openaiFake.ts';

if (!process.send) throw new Error('bench/openaiFakeChild.ts is started by bench/openaiFake.ts');

async function main(): Promise<void> {
  const fake = await startOpenAIFake({ apiKey: process.env.BENCH_FAKE_OPENAI_KEY });
  process.on('message', async (msg: { type: string }) => {
    if (msg.type === 'requests') {
      const byAnswer: Record<string, number> = {};
      for (const r of fake.requests) byAnswer[String(r.answer)] = (byAnswer[String(r.answer)] ?? 0) + 1;
      process.send!({ type: 'requests', body: byAnswer });
      // The record grows with every request; only the counts are wanted.
      fake.requests.length = 0;
    } else if (msg.type === 'stop') {
      await fake.stop();
      process.send!({ type: 'stop', body: null });
      process.disconnect();
    }
  });
  // The bench went away (crash or Ctrl-C): do not linger.
  process.on('disconnect', () => {
    setTimeout(() => process.exit(0), 2_000).unref();
    void fake.stop().finally(() => process.exit(0));
  });
  process.send!({ type: 'ready', baseUrl: fake.baseUrl });
}

main().catch((err) => {
  process.stderr.write(`bench fake OpenAI server failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
