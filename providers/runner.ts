// The attempt runner: sends STARTING attempts to their providers, exactly once each.
//
// Every instance runs one. An attempt is claimed by one UPDATE … FOR UPDATE SKIP LOCKED that stamps
// the instance and a fencing token on it, and a claimed attempt is never claimed again (a trigger
// refuses it). The claim lasts until the attempt's deadline: the call is aborted then, and a result
// that comes back later cannot be written by this runner (settleAttempt checks the token and the
// deadline). An instance that dies mid-call leaves its attempt to the deadline sweep, which turns it
// UNKNOWN: nothing is sent twice, silently or otherwise.
import pg from 'pg';
import { appendEvents } from '../db/events.ts';
import { claimAttemptsToDispatch, markRunningIfClaimed, markUnknownIfClaimed, recordPromptTokens, type ClaimedAttempt } from '../db/dispatch.ts';
import { lockJob } from '../db/jobs.ts';
import { inTransaction } from '../db/tx.ts';
import type { Core } from '../core/core.ts';
import { LeaseLostError, settleAttempt } from '../core/settleAttempt.ts';
import { sleep } from './adapters/http.ts';
import type { CallOutcome } from './adapters/types.ts';
import { OPERATIONS } from './operations/index.ts';
import { checkPromptFits } from './tokenizers.ts';

export const DISPATCH_CHANNEL = 'onejob_dispatch';
/** The safety net under the NOTIFY wake-up. */
const DISPATCH_POLL_INTERVAL_MS = 250;
/** How often a background request is asked for its outcome while the runner holds it. */
const RETRIEVE_INTERVAL_MS = 200;
const CLAIM_BATCH = 16;
const MAX_CALLS_IN_FLIGHT = 64;

export class AttemptRunner {
  private readonly inFlight = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private listener: pg.Client | undefined;
  private poll: NodeJS.Timeout | undefined;
  private claiming: Promise<void> | undefined;
  private claimAgain = false;
  private stopped = false;

  constructor(
    private readonly core: Core,
    private readonly databaseUrl: string,
    readonly instanceId: string,
  ) {}

  async start(): Promise<void> {
    const listener = new pg.Client({ connectionString: this.databaseUrl, application_name: 'onejob-runner' });
    listener.on('notification', () => this.kick());
    listener.on('error', (err) => this.core.log.warn({ err }, 'runner wake-up connection failed; polling continues'));
    await listener.connect();
    await listener.query(`LISTEN ${DISPATCH_CHANNEL}`);
    this.listener = listener;
    this.poll = setInterval(() => this.kick(), DISPATCH_POLL_INTERVAL_MS);
    this.poll.unref();
    this.kick();
  }

  /** Aborts calls in flight (their attempts become UNKNOWN: the provider may have done the work). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    await this.listener?.end().catch(() => {});
    await this.claiming;
    for (const { controller } of this.inFlight.values()) controller.abort('the instance is stopping');
    await Promise.all([...this.inFlight.values()].map((c) => c.done));
  }

  callsInFlight(): number {
    return this.inFlight.size;
  }

  /** Look for attempts to send now (after a local createJob or retryJob, or a wake-up). */
  kick(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = this.claimWhileRoom()
      .catch((err) => this.core.log.error({ err }, 'claiming attempts failed; retrying on the next tick'))
      .finally(() => {
        this.claiming = undefined;
        if (this.claimAgain) {
          this.claimAgain = false;
          this.kick();
        }
      });
  }

  private async claimWhileRoom(): Promise<void> {
    for (;;) {
      const room = Math.min(CLAIM_BATCH, MAX_CALLS_IN_FLIGHT - this.inFlight.size);
      if (room <= 0 || this.stopped) return;
      const claimed = await claimAttemptsToDispatch(this.core.pool, { instanceId: this.instanceId, now: this.core.clock.now(), limit: room });
      for (const attempt of claimed) {
        const controller = new AbortController();
        const done = this.dispatch(attempt, controller)
          .catch((err) => this.core.log.error({ err, attemptId: attempt.id }, 'dispatching an attempt failed'))
          .finally(() => this.inFlight.delete(attempt.id));
        this.inFlight.set(attempt.id, { controller, done });
      }
      if (claimed.length < room) return;
    }
  }

  private async dispatch(attempt: ClaimedAttempt, controller: AbortController): Promise<void> {
    const { core } = this;
    const fence = attempt.leaseToken!;
    const provider = core.providers.get(attempt.provider);
    const adapter = core.providers.adapter(attempt.provider);
    const operation = OPERATIONS.get(attempt.operation)!;
    if (!provider || !adapter || provider.kind === 'manual') {
      return this.write(attempt, { kind: 'failed', reason: `provider ${attempt.provider} cannot be called by this service` });
    }
    const prompt = operation.prompt.render(attempt.input);
    const fits = checkPromptFits(provider.kind, core.providers.model(attempt.provider), prompt, operation.prompt.maxOutputTokens, provider.contextTokens);
    await recordPromptTokens(core.pool, attempt.id, fits.promptTokens);
    if (!fits.ok) return this.write(attempt, { kind: 'failed', reason: fits.reason });

    const untilDeadline = attempt.deadlineAt.getTime() - core.clock.now().getTime();
    // The claim ends at the deadline (counting the prompt or the database took that long): past it, the
    // attempt is not this runner's to send any more — a request sent late could run alongside an operator's
    // retry. Nothing was sent; the deadline sweep turns it UNKNOWN (rule 9), as for an instance that died.
    if (untilDeadline <= 0) {
      core.log.warn({ attemptId: attempt.id, jobId: attempt.jobId }, 'the attempt reached its deadline before it could be sent; not sent');
      return;
    }
    const deadline = setTimeout(() => controller.abort('deadline'), Math.max(0, untilDeadline));
    try {
      let outcome: CallOutcome = await adapter.call({
        attemptId: attempt.id,
        operation: operation.name,
        input: attempt.input,
        prompt,
        outputSchema: operation.outputJsonSchema(),
        maxOutputTokens: operation.prompt.maxOutputTokens,
        signal: controller.signal,
        deadline: attempt.deadlineAt,
        onAccepted: (providerRequestId) => this.markRunning(attempt, fence, providerRequestId),
      });
      // A poll that cannot tell (a 5xx or a dropped connection on GET) says nothing about the request the
      // provider holds: keep asking until the deadline, rather than give the claim up as UNKNOWN at once.
      const providerRequestId = outcome.kind === 'pending' ? outcome.providerRequestId : undefined;
      while (
        providerRequestId &&
        (outcome.kind === 'pending' || outcome.kind === 'unknown') &&
        adapter.retrieve &&
        (await sleep(RETRIEVE_INTERVAL_MS, controller.signal))
      ) {
        outcome = await adapter.retrieve({ attemptId: attempt.id, providerRequestId }, controller.signal);
      }
      if (outcome.kind === 'pending') {
        outcome = { kind: 'unknown', reason: `no outcome before ${String(controller.signal.reason ?? 'the deadline')}`, providerRequestId: outcome.providerRequestId };
      }
      await this.write(attempt, outcome);
    } finally {
      clearTimeout(deadline);
    }
  }

  private async markRunning(attempt: ClaimedAttempt, fence: number, providerRequestId: string | undefined): Promise<void> {
    const now = this.core.clock.now();
    await inTransaction(this.core.pool, async (client) => {
      await lockJob(client, attempt.jobId, undefined);
      const running = await markRunningIfClaimed(client, { id: attempt.id, leaseToken: fence, providerRequestId: providerRequestId ?? null, now });
      if (running) await appendEvents(client, attempt.jobId, now, [{ type: 'ATTEMPT_RUNNING', attemptId: attempt.id, message: 'the provider accepted the request' }]);
    });
  }

  private async write(attempt: ClaimedAttempt, outcome: CallOutcome): Promise<void> {
    const { core } = this;
    const source = `provider ${attempt.provider}`;
    const fence = attempt.leaseToken!;
    try {
      if (outcome.kind === 'result') {
        await settleAttempt(core, attempt.id, { result: outcome.output }, source, {
          fence,
          usageTokens: outcome.usageTokens,
          providerRequestId: outcome.providerRequestId,
        });
      } else if (outcome.kind === 'failed') {
        await settleAttempt(core, attempt.id, { error: outcome.reason }, source, { fence, providerRequestId: outcome.providerRequestId });
      } else if (outcome.kind === 'unknown') {
        await this.markUnknown(attempt, fence, outcome.reason, outcome.providerRequestId);
      }
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
      // Past the deadline the attempt is UNKNOWN and belongs to reconciliation and operators; the
      // outcome is logged so that an operator can act on it.
      core.log.warn({ attemptId: attempt.id, jobId: attempt.jobId, outcome }, `outcome arrived after the claim ended; not written: ${err.message}`);
    }
  }

  private async markUnknown(attempt: ClaimedAttempt, fence: number, reason: string, providerRequestId: string | undefined): Promise<void> {
    const now = this.core.clock.now();
    await inTransaction(this.core.pool, async (client) => {
      await lockJob(client, attempt.jobId, undefined);
      const unknown = await markUnknownIfClaimed(client, { id: attempt.id, leaseToken: fence, providerRequestId: providerRequestId ?? null });
      if (unknown) {
        await appendEvents(client, attempt.jobId, now, [
          { type: 'ATTEMPT_UNKNOWN', attemptId: attempt.id, message: `${reason}; the provider may still have done the work` },
        ]);
      }
    });
  }
}
