// `npm run bench`: figures for onejob, with how each was measured. Never pass/fail: it prints what it
// saw and exits 0 unless it crashes. Its own database (created, migrated, dropped), real instances
// (buildApp, port 0, silent logs, each in its own process as `npm start` runs it), loopback only, and
// every phase bounded in time or in count.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { createToken } from '../core/auth.ts';
import { createPool } from '../db/pool.ts';
import { ATTEMPT_TIMEOUT_MS, MODEL, PROVIDER, runAttempts } from './attempts.ts';
import { createBenchDatabase, redactUrl, type BenchDatabase } from './database.ts';
import { runEvents } from './events.ts';
import { startInstance } from './instances.ts';
import { latencyLine, ms, num } from './stats.ts';
import { runStorm } from './storm.ts';
import { runThroughput, type WindowResult } from './throughput.ts';

const env = (name: string, fallback: number) => {
  const raw = process.env[name];
  const v = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number (got ${raw})`);
  return v;
};

const settings = {
  concurrency: Math.round(env('BENCH_CONCURRENCY', 64)),
  durationMs: env('BENCH_DURATION_S', 5) * 1000,
  warmupMs: env('BENCH_WARMUP_S', 1.5) * 1000,
  rounds: Math.round(env('BENCH_ROUNDS', 3)),
  profileMs: env('BENCH_PROFILE_S', 3) * 1000,
  storm: Math.round(env('BENCH_STORM', 1000)),
  subscribers: Math.round(env('BENCH_SUBSCRIBERS', 1000)),
  subscriptionsPerSocket: Math.round(env('BENCH_SUBS_PER_SOCKET', 1)),
  mutations: Math.max(2, Math.round(env('BENCH_MUTATIONS', 30))),
  attempts: Math.round(env('BENCH_ATTEMPTS', 300)),
  attemptsConcurrency: Math.round(env('BENCH_ATTEMPTS_CONCURRENCY', 8)),
};
const forceProfile = process.env.BENCH_PROFILE === '1';
/** The whole bench gives up (and cleans up) after this, whatever is still running. */
const WATCHDOG_MS = 6 * 60_000;

const out = (line = '') => process.stdout.write(`${line}\n`);
const progress = (line: string) => process.stderr.write(`  … ${line}\n`);
const pct = (v: number) => `${v.toFixed(1)}%`;

/** The commit the instances run, and whether the working tree differs from it (read-only git). */
function codeRevision(): string {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const head = git('rev-parse', '--short', 'HEAD');
    const changed = git('status', '--porcelain', '--untracked-files=no').split('\n').filter(Boolean).length;
    return `git ${head}${changed ? ` + ${changed} uncommitted changed file(s) in the working tree` : ', clean working tree'}`;
  } catch {
    return 'unknown (no git)';
  }
}

function rerunCommand(): string {
  const vars = Object.keys(process.env)
    .filter((k) => k.startsWith('BENCH_'))
    .sort()
    .map((k) => `${k}=${process.env[k]}`);
  if (process.env.DATABASE_URL) vars.unshift(`DATABASE_URL=${redactUrl(process.env.DATABASE_URL)}`);
  return [...vars, 'npm run bench'].join(' ');
}

async function main(): Promise<void> {
  const started = performance.now();
  out('onejob bench — figures, not a pass/fail test');
  out('='.repeat(72));
  progress(process.env.DATABASE_URL ? 'creating the bench database' : 'starting the embedded Postgres and creating the bench database');
  const db: BenchDatabase = await createBenchDatabase();
  /** Everything started in its own process (instances, the fake provider), stopped at cleanup. */
  const instances: { stop(): Promise<void> }[] = [];
  const pool = createPool(db.url, 4);
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      progress('stopping instances and dropping the bench database');
      await Promise.allSettled(instances.map((i) => i.stop()));
      await pool.end().catch(() => {});
      await db.drop();
    })());
  const giveUp = (why: string, code: number) => {
    process.stderr.write(`bench: ${why}; cleaning up\n`);
    void cleanup().finally(() => process.exit(code));
  };
  const watchdog = setTimeout(() => giveUp(`still running after ${WATCHDOG_MS / 1000} s`, 1), WATCHDOG_MS);
  watchdog.unref();
  process.once('SIGINT', () => giveUp('interrupted', 130));
  process.once('SIGTERM', () => giveUp('terminated', 143));
  try {
    const owner = await createToken(pool, 'bench-owner', 'owner');
    const operator = await createToken(pool, 'bench-operator', 'operator');

    const cpus = os.cpus();
    out('Machine');
    out(`  cores            ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown'} (os.cpus()), ${Math.round(os.totalmem() / 2 ** 30)} GiB RAM`);
    out(`  load average     ${os.loadavg().map((v) => v.toFixed(2)).join(' / ')} (1/5/15 min) at start: other processes here share the cores and move every figure`);
    out(`  Node             ${process.version} (${process.platform}/${process.arch})`);
    out(`  Postgres         ${db.postgresVersion}, max_connections ${db.maxConnections}, ${db.server.embedded ? 'embedded (no DATABASE_URL)' : `DATABASE_URL ${redactUrl(db.server.adminUrl)}`}`);
    out(`  code measured    ${codeRevision()}`);
    out(`  bench database   ${db.name} (created, migrated with db/migrate.ts, dropped at the end)`);
    out('  instances        buildApp() on 127.0.0.1:0, log level silent, each in its own Node process (bench/instance.ts);');
    out('                   providers primary/backup of kind manual with timeoutMs 3600000, so no bench attempt falls due');
    out('                   (phase 4 stops A and B and starts instance C with one provider of kind openai, against a local fake)');
    out('  load generator   this process: node:http with keep-alive agents, graphql-ws clients on ws; everything shares the same cores');

    progress('starting instance A');
    const a = await startInstance(db.url, 'A');
    instances.push(a);

    // ---------------------------------------------------------------------------------------------
    out();
    out(`1. createJob throughput, fresh keys, ${settings.concurrency} concurrent callers`);
    out('-'.repeat(72));
    const tp = await runThroughput(a, owner, db.url, settings, progress, forceProfile);
    out(`  how: closed loop (each caller sends its next request when the last answered), ${settings.rounds} round(s) of`);
    out(`       ${settings.durationMs / 1000} s per side, alternating service/direct, each after a ${settings.warmupMs / 1000} s warm-up (first round: ${(2 * settings.warmupMs) / 1000} s).`);
    out(`       service: POST /graphql on instance A with the acceptance tests' CreateJob document (full Job selection),`);
    out(`                ${settings.concurrency} keep-alive connections (node:http Agent maxSockets ${settings.concurrency}).`);
    out(`       direct:  db/jobs.ts claimKeyAndCreateJob from this process, ${settings.concurrency} concurrent callers on a pg Pool of`);
    out(`                max ${tp.appPoolMax} (db/pool.ts createPool default, the app's own pool size), with the same fingerprint/uuid work.`);
    for (const [i, w] of tp.service.entries()) {
      const d = tp.direct[i]!;
      out(`  round ${i + 1}: service ${num(w.rps)} req/s (${w.failed} failed)   direct ${num(d.rps)} calls/s (${d.failed} failed)`);
    }
    out(`  service   ${num(tp.serviceRps)} req/s    ${latencyLine(tp.serviceLatency)}`);
    out(`  direct    ${num(tp.directRps)} calls/s  ${latencyLine(tp.directLatency)}`);
    const ratio = tp.serviceRps / tp.directRps;
    out(`  ratio service/direct = ${ratio.toFixed(2)}  (target >= 0.5: ${ratio >= 0.5 ? 'met' : 'NOT met'})`);
    const firstError = [...tp.service, ...tp.direct].find((w) => w.firstError)?.firstError;
    if (firstError) out(`  first failure: ${firstError}`);
    out('  where the time goes (measured windows; CPU per request = CPU seconds / requests answered):');
    const perReq = (ws: WindowResult[], pick: (w: WindowResult) => number | undefined) => {
      const vals = ws.map(pick);
      if (vals.some((v) => v === undefined)) return 'n/a';
      const cpu = (vals as number[]).reduce((sum, v) => sum + v, 0);
      return ms((1000 * cpu) / ws.reduce((sum, w) => sum + w.ok, 0));
    };
    const otherCores = (ws: WindowResult[]) => {
      const vals = ws.map((w) => w.cpu.otherS);
      if (vals.some((v) => v === undefined)) return 'n/a';
      return (vals as number[]).reduce((sum, v) => sum + v, 0) / ws.reduce((sum, w) => sum + w.wallS, 0);
    };
    const waitLine = (ws: WindowResult[]) => {
      const acc = new Map<string, number>();
      for (const w of ws) for (const { what, pct: p } of w.pg.waits) acc.set(what, (acc.get(what) ?? 0) + p / ws.length);
      const active = ws.reduce((sum, w) => sum + w.pg.meanActive, 0) / ws.length;
      return `${num(active, 1)} active backends on average; ${[...acc].sort((x, y) => y[1] - x[1]).slice(0, 4).map(([k, v]) => `${k} ${pct(v)}`).join(', ')}`;
    };
    const oc = (ws: WindowResult[]) => {
      const v = otherCores(ws);
      return typeof v === 'number' ? `${v.toFixed(2)} cores` : v;
    };
    out(`    service: CPU/request: instance ${perReq(tp.service, (w) => w.cpu.instanceS)}, load generator ${perReq(tp.service, (w) => w.cpu.benchS)}, Postgres backends ${perReq(tp.service, (w) => w.cpu.postgresS)}; other processes on the machine used ${oc(tp.service)}`);
    out(`             Postgres: ${waitLine(tp.service)}`);
    out(`    direct:  CPU/request: pg caller ${perReq(tp.direct, (w) => w.cpu.benchS)}, Postgres backends ${perReq(tp.direct, (w) => w.cpu.postgresS)}; other processes on the machine used ${oc(tp.direct)}`);
    out(`             Postgres: ${waitLine(tp.direct)}`);
    if ([...tp.service, ...tp.direct].some((w) => w.pg.waits.some((x) => x.what === 'Lock:object' && x.pct > 20))) {
      out('             (Lock:object is the database-wide lock a transaction that sent NOTIFY takes at commit and holds through');
      out('              its WAL flush: the job_events trigger\'s pg_notify makes every createJob commit take its turn.)');
    }
    const waits = tp.service.map((w) => w.poolWaitingMean).filter((v): v is number => v !== undefined);
    if (waits.length) {
      out(`    instance A's pg pool: mean ${num(waits.reduce((s, v) => s + v, 0) / waits.length, 1)} requests waiting for one of its ${tp.appPoolMax} connections (sampled every 100 ms)`);
    }
    if (tp.profile) {
      out(`  CPU profile of instance A over a separate ${settings.profileMs / 1000} s window at the same load (${num(tp.profile.samples)} samples; self time):`);
      out('    by area:');
      for (const { area, pct: p } of tp.profile.byArea) out(`      ${pct(p).padStart(6)}  ${area}`);
      out('    by function:');
      for (const { fn, pct: p } of tp.profile.byFunction.slice(0, 12)) out(`      ${pct(p).padStart(6)}  ${fn}`);
    }

    // ---------------------------------------------------------------------------------------------
    progress('starting instance B');
    const b = await startInstance(db.url, 'B');
    instances.push(b);
    out();
    out(`2. Duplicate storm: ${num(settings.storm)} concurrent identical createJob (same key, same payload)`);
    out('-'.repeat(72));
    const storm = await runStorm([a, b], owner.token, pool, settings.storm, db.url);
    out(`  how: ${num(settings.storm)} clients, each with its own keep-alive connection opened beforehand (batches of 100),`);
    out(`       alternately on instances A and B, all sent at once; latency from each send to its answer.`);
    out(`  answers ${num(storm.answered)}/${num(storm.requests)} in ${ms(storm.wallMs)}; errors: ${storm.errors.size ? [...storm.errors].map(([k, v]) => `${k} ×${v}`).join(', ') : 'none'}`);
    out(`  distinct job ids in the answers: ${storm.distinctJobIds}   replayed:false answers: ${storm.replayedFalse}   replayed:true: ${storm.replayedTrue}`);
    out(`  jobs with that key in the database: ${storm.jobsInDatabase}   => ${storm.distinctJobIds === 1 && storm.replayedFalse === 1 && storm.jobsInDatabase === 1 ? 'exactly one job, as the contract requires' : 'NOT exactly one job'}`);
    out(`  latency   ${latencyLine(storm.latency)}`);
    out(`  Postgres during the storm: ${num(storm.pg.meanActive, 1)} active backends on average; ${storm.pg.waits.slice(0, 4).map((w) => `${w.what} ${pct(w.pct)}`).join(', ')}`);
    if (storm.pg.waits.some((w) => w.what === 'Lock:tuple' && w.pct > 20)) {
      out('  (Lock:tuple: the replays queue on the key row. ON CONFLICT DO UPDATE ... WHERE locks the conflicting row even when');
      out('   its WHERE is false, so each replay takes the row lock, gets a transaction id and commits with a WAL flush, in turn.)');
    }

    // ---------------------------------------------------------------------------------------------
    out();
    out(`3. Event latency, commit on A -> subscriber on B, ${num(settings.subscribers)} subscriptions to one job`);
    out('-'.repeat(72));
    const ev = await runEvents(a, b, owner.token, operator.token, pool, db.url, {
      subscribers: settings.subscribers,
      subscriptionsPerSocket: settings.subscriptionsPerSocket,
      mutations: settings.mutations,
      perMutationTimeoutMs: 10_000,
      connectTimeoutMs: 60_000,
    }, progress);
    out(`  how: ${num(ev.subscribers)} graphql-ws subscriptions jobEvents(jobId, afterSeq: 0) on B over ${num(ev.sockets)} WebSocket(s)`);
    out(`       (${settings.subscriptionsPerSocket === 1 ? 'one client and socket per subscription' : `${settings.subscriptionsPerSocket} subscriptions multiplexed per socket`}), set up in ${ms(ev.connectMs)}; B's hub reported ${num(ev.subscribersOnB)} subscribers.`);
    out(`       On A, ${ev.mutations.length} mutations one at a time on that job, each waiting until every subscriber had its events:`);
    const kinds = new Map<string, { n: number; events: number }>();
    for (const m of ev.mutations) {
      const k = kinds.get(m.kind) ?? { n: 0, events: 0 };
      kinds.set(m.kind, { n: k.n + 1, events: k.events + m.events });
    }
    out(`       ${[...kinds].map(([k, v]) => `${k} ×${v.n} (${v.events} events)`).join(', ')}.`);
    out(`       Latency = receipt in the subscriber's callback here - arrival of A's mutation response (its commit is before that).`);
    out(`  events per subscriber: ${ev.finalSeq} (${ev.storedBeforeSubscribing} stored before subscribing + ${ev.finalSeq - ev.storedBeforeSubscribing} live)`);
    out(`  delivered ${num(ev.delivered)} / expected ${num(ev.expected)}   gaps ${ev.gaps}   duplicates ${ev.duplicates}   out of order ${ev.outOfOrder}   subscription errors ${ev.subscriptionErrors}${ev.firstSubscriptionError ? ` (first: ${ev.firstSubscriptionError})` : ''}`);
    if (ev.timedOutMutations) out(`  mutations whose events did not reach every subscriber within 10 s: ${ev.timedOutMutations}`);
    out(`  commit->receipt (from A's response)      ${latencyLine(ev.fromResponse)}${ev.negativeFromResponse ? `; ${num(ev.negativeFromResponse)} arrived before A's response` : ''}`);
    out(`  send->receipt   (upper bound)            ${latencyLine(ev.fromSend)}`);
    out(`  A's response -> last of ${num(ev.subscribers)} subscribers  ${latencyLine(ev.fanOutComplete)}`);
    out(`  the mutations themselves on A            ${latencyLine(ev.mutationLatency)}`);
    out(`  A's response -> its NOTIFY at a plain LISTEN in this process  ${latencyLine(ev.notifyFromResponse)}${ev.notifiesMissing ? `; ${ev.notifiesMissing} never seen` : ''}`);
    if (ev.fromResponse.p50 > 4_000) {
      out('  NOTE: live events took seconds: they look delivered by the hub\'s 5 s safety poll, not by its NOTIFY wake-up;');
      out('        compare with the NOTIFY line above (a plain LISTEN here) to tell Postgres from instance B.');
    }
    const perDelivery = (cpuS: number) => `${((1e6 * cpuS) / Math.max(1, ev.delivered - ev.subscribers * ev.storedBeforeSubscribing)).toFixed(0)} µs`;
    out(`  CPU per live delivery during the series: instance B ${perDelivery(ev.cpu.bS)}, subscribers' process ${perDelivery(ev.cpu.benchS)}, instance A ${perDelivery(ev.cpu.aS)}`);
    if (ev.cpu.machineS !== undefined) {
      const others = Math.max(0, ev.cpu.machineS - ev.cpu.aS - ev.cpu.bS - ev.cpu.benchS) / ev.cpu.wallS;
      out(`  the series took ${ev.cpu.wallS.toFixed(1)} s; meanwhile Postgres and other processes on the machine used ${others.toFixed(2)} cores`);
    }

    // ---------------------------------------------------------------------------------------------
    // A and B have done their part; stopped now so that their runners do not claim the attempts of
    // phase 4 (they do not know its provider) and their timers do not share the cores.
    progress('stopping instances A and B');
    await Promise.all([a.stop(), b.stop()]);
    out();
    out(`4. Overhead per attempt: the same OpenAI adapter call, straight and through the service`);
    out('-'.repeat(72));
    const at = await runAttempts(db.url, owner.token, pool, {
      n: settings.attempts,
      concurrency: settings.attemptsConcurrency,
      warmup: 30,
      seriesBudgetMs: 8_000,
    }, progress, (p) => instances.push(p));
    const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');
    const signedMs = (v: number) => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${ms(v)}` : 'n/a');
    out(`  how: the tests' fake OpenAI server (test/fakes/openaiFake.ts) in its own process on ${at.baseUrl}; it checks the key and`);
    out(`       the strict schema and answers each chat.completions request at once with a good summary. Provider "${PROVIDER}":`);
    out(`       kind openai, api chat, model ${MODEL}, timeoutMs ${ATTEMPT_TIMEOUT_MS}. ${settings.attempts} calls per series, 1 at a time then ${settings.attemptsConcurrency} at a time`);
    out(`       (each caller starts its next when its last ended; 8 s cap per series), after 30 warm-up calls of each kind.`);
    out(`       direct:  openaiAdapter(config).call() from this process, summarize's prompt.render(input) and outputJsonSchema()`);
    out(`                (rendered once); latency = the call's promise: fetch, the fake's work, parsing the JSON output.`);
    out(`       service: instance C (its own process, like A and B, which are stopped by now; config with that provider only,`);
    out(`                statement counting on): createJob over HTTP (provider ${PROVIDER}, no fallbacks, attemptTimeoutMs ${ATTEMPT_TIMEOUT_MS}, fresh key,`);
    out(`                the acceptance tests' full Job selection), then at once a graphql-ws subscription jobEvents(jobId, afterSeq: 0)`);
    out(`                on C over a socket opened beforehand (one per caller); latency = createJob sent -> JOB_SUCCEEDED received.`);
    out(`                Included: createJob (HTTP, GraphQL, the insert and its commit); the runner's wake-up (NOTIFY onejob_dispatch`);
    out(`                from the attempt insert's trigger, its 250 ms poll as the safety net) and its claim; rendering the prompt and`);
    out(`                counting its tokens (js-tiktoken o200k_base) and writing prompt_tokens; the same adapter call; the RUNNING`);
    out(`                transaction; the output check and the settle transaction (CAS on the job, events, usage debit, outbox);`);
    out(`                then the event's NOTIFY, the hub's read and the delivery over the WebSocket. A job that settles before the`);
    out(`                subscription is in place comes from the replay (afterSeq 0), so subscribing is inside the figure too.`);
    out(`       CPU per call: process CPU time (process.cpuUsage) over the series / calls; the fake's own process is in neither.`);
    for (const sp of at.series) {
      out(`  ${sp.concurrency} at a time: direct ${num(sp.direct.values.length)} calls in ${ms(sp.direct.wallMs)} (${num((1000 * sp.direct.values.length) / sp.direct.wallMs)}/s, ${sp.direct.failed} failed),` +
        ` service ${num(sp.service.values.length)} attempts in ${ms(sp.service.wallMs)} (${num((1000 * sp.service.values.length) / sp.service.wallMs)}/s, ${sp.service.failed} failed)`);
      const firstFailure = sp.direct.firstError ?? sp.service.firstError;
      if (firstFailure) out(`    first failure: ${firstFailure}`);
      out(`    direct   adapter call                 ${latencyLine(sp.directLatency)}`);
      out(`    service  createJob sent -> SUCCEEDED  ${latencyLine(sp.serviceTotal)}`);
      out(`             createJob sent -> answer     ${latencyLine(sp.serviceCreateJob)}`);
      out(`             answer -> SUCCEEDED          ${latencyLine(sp.serviceAfterAnswer)}`);
      const cores = (v: number | undefined) => (v === undefined ? 'n/a' : `${v.toFixed(2)} of ${cpus.length}`);
      out(`    CPU per call: direct: this process ${ms(sp.cpu.directSelfMs)} (machine busy ${cores(sp.cpu.directMachineCores)} cores);` +
        ` service: instance C ${ms(sp.cpu.serviceInstanceMs)}, this process ${ms(sp.cpu.serviceSelfMs)} (machine busy ${cores(sp.cpu.serviceMachineCores)} cores)`);
      if ((sp.cpu.serviceMachineCores ?? 0) > 0.9 * cpus.length) {
        out(`    (every core was busy during the service series: its latencies here include waiting for a CPU)`);
      }
      out(`    overhead per attempt (service - direct): p50 ${signedMs(sp.serviceTotal.p50 - sp.directLatency.p50)}, p99 ${signedMs(sp.serviceTotal.p99 - sp.directLatency.p99)}` +
        ` (differences of percentiles, not percentiles of differences)`);
    }
    out(`  where the time goes, 1 at a time (p50 / p99 over ${num(at.timeline.n)} attempts; from the clock of this process and the timestamps`);
    out(`  instance C wrote with its own clock, same machine; C's timestamps have 1 ms resolution, so steps are ±1 ms):`);
    for (const s of at.timeline.steps) out(`    ${s.what.padEnd(62)} ${ms(s.p50).padStart(9)} / ${ms(s.p99)}`);
    out(`  Database round trips per attempt: statements instance C's pg pool sent during each series / attempts in the series`);
    out(`  (bench/queryCounter.ts, on in C only: its pool's clients have query() wrapped, BEGIN and COMMIT included, and each`);
    out(`  checkout is attributed by its statements; no app code changed; pg_stat_statements is not used (not installed here).`);
    out(`  Every statement is one round trip; the LISTEN connections of the runner and the hub are outside the pool, not counted.)`);
    out(`    ${'phase'.padEnd(24)} ${'1 at a time'.padStart(11)} ${`${settings.attemptsConcurrency} at a time`.padStart(11)}`);
    const row = (label: string, vals: number[], note = '') =>
      out(`    ${label.padEnd(24)} ${vals.map((v) => f2(v).padStart(11)).join(' ')}${note ? `   ${note}` : ''}`);
    const path = ['createJob', 'claim', 'prompt tokens', 'mark running', 'settle'];
    for (const r of at.statements.filter((r) => path.includes(r.phase))) row(r.phase, r.perAttempt, r.note);
    const sum = (rows: typeof at.statements) => at.series.map((_, i) => rows.reduce((acc, r) => acc + r.perAttempt[i]!, 0));
    row('= the attempt\'s path', sum(at.statements.filter((r) => path.includes(r.phase))),
      `each phase here commits writes and waits for its WAL flush (synchronous_commit ${at.synchronousCommit}); one claim may take several`);
    for (const r of at.statements.filter((r) => !path.includes(r.phase))) row(r.phase, r.perAttempt, r.note);
    for (const u of at.unclassified) row('other', u.perAttempt, u.text.slice(0, 90));
    row('= all statements', at.statementsTotal, `in ${at.checkoutsTotal.map(f2).join(' / ')} pool checkouts (pool.query calls and transactions) per attempt`);
    out(`  the fake answered ${Object.entries(at.fakeAnswers).map(([k, v]) => `${k} ×${num(v)}`).join(', ')} for ${num(at.callsMade)} calls and attempts made (warm-ups included)`);

    out();
    out(`Total bench time ${((performance.now() - started) / 1000).toFixed(1)} s.`);
    out(`Rerun: ${rerunCommand()}`);
    out('  (knobs: BENCH_CONCURRENCY, BENCH_DURATION_S, BENCH_WARMUP_S, BENCH_ROUNDS, BENCH_STORM, BENCH_SUBSCRIBERS,');
    out('   BENCH_SUBS_PER_SOCKET, BENCH_MUTATIONS, BENCH_PROFILE=1 to always profile, BENCH_PROFILE_S, BENCH_ATTEMPTS,');
    out('   BENCH_ATTEMPTS_CONCURRENCY)');
  } finally {
    await cleanup();
    clearTimeout(watchdog);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench crashed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
