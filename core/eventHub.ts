// Live job events for subscribers on this instance, whichever instance made the change.
//
// The events table is the truth; Postgres NOTIFY (sent by the table's trigger at commit) is only a
// wake-up saying "job J has new events". On a wake-up the hub reads the job's events after the
// furthest-behind subscriber's last seq, once for all of that job's subscribers, and hands each one
// the events right after its own last seq. A subscriber takes only seq = last + 1, so it sees no gap
// and no duplicate whatever order wake-ups and reads arrive in. A lost notification (the listening
// connection dropped) only delays: on reconnect, and every SAFETY_POLL_INTERVAL_MS, every watched job
// is read again.
import pg from 'pg';
import { Repeater } from '@repeaterjs/repeater';
import type { Logger } from 'pino';
import { eventsAfter } from '../db/events.ts';
import type { Pool } from '../db/pool.ts';
import type { JobEvent } from '../db/rows.ts';

export const JOB_EVENTS_CHANNEL = 'onejob_job_events';
const SAFETY_POLL_INTERVAL_MS = 5_000;
const RECONNECT_DELAY_MS = 500;
const CONNECT_TIMEOUT_MS = 10_000;
const FETCH_PAGE = 1_000;
/** Events handed to a subscriber and not yet taken; past this it is skipped and caught up later. */
const MAX_UNDELIVERED_PER_SUBSCRIBER = 256;

interface Subscriber {
  lastSeq: number;
  undelivered: number;
  push(event: JobEvent): Promise<unknown>;
}

interface Topic {
  subscribers: Set<Subscriber>;
  reading: Promise<void> | undefined;
  readAgain: boolean;
  /** The highest seq seen for the job, from notifications and reads. */
  latestSeq: number;
}

function noteSeq(topic: Topic, seq: number): void {
  if (seq > topic.latestSeq) topic.latestSeq = seq;
}

const full = (s: Subscriber) => s.undelivered >= MAX_UNDELIVERED_PER_SUBSCRIBER;

export class JobEventHub {
  private readonly topics = new Map<string, Topic>();
  private listener: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private poll: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly connectionString: string,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.listen();
    this.poll = setInterval(() => this.wakeAll(), SAFETY_POLL_INTERVAL_MS);
    this.poll.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    clearTimeout(this.reconnectTimer);
    await this.listener?.end().catch(() => {});
    await Promise.all([...this.topics.values()].map((t) => t.reading));
  }

  /** Every stored event of the job after `afterSeq`, then live ones, until the consumer stops. */
  subscribe(jobId: string, afterSeq: number): AsyncIterableIterator<JobEvent> {
    return new Repeater<JobEvent>(async (push, stopped) => {
      const subscriber: Subscriber = { lastSeq: afterSeq, undelivered: 0, push };
      let topic = this.topics.get(jobId);
      if (!topic) {
        topic = { subscribers: new Set(), reading: undefined, readAgain: false, latestSeq: 0 };
        this.topics.set(jobId, topic);
      }
      // Registered before the first read: a change committed from here on wakes a read that includes it.
      topic.subscribers.add(subscriber);
      this.wake(jobId);
      await stopped;
      topic.subscribers.delete(subscriber);
      if (topic.subscribers.size === 0 && this.topics.get(jobId) === topic) this.topics.delete(jobId);
    });
  }

  /** How many subscribers this instance serves now. */
  subscriberCount(): number {
    let n = 0;
    for (const t of this.topics.values()) n += t.subscribers.size;
    return n;
  }

  private wake(jobId: string): void {
    const topic = this.topics.get(jobId);
    if (!topic) return;
    if (topic.reading) {
      topic.readAgain = true;
      return;
    }
    topic.reading = this.read(jobId, topic).finally(() => {
      topic.reading = undefined;
      if (topic.readAgain) {
        topic.readAgain = false;
        this.wake(jobId);
      }
    });
  }

  private wakeAll(): void {
    for (const jobId of this.topics.keys()) this.wake(jobId);
  }

  private async read(jobId: string, topic: Topic): Promise<void> {
    try {
      for (;;) {
        // A full subscriber is left out (its drain wakes a read for it): reading from its lastSeq
        // would fetch the same page again and again while it cannot take any of it.
        const open = [...topic.subscribers].filter((s) => !full(s));
        if (open.length === 0) return;
        const from = Math.min(...open.map((s) => s.lastSeq));
        const events = await eventsAfter(this.pool, jobId, from, FETCH_PAGE);
        noteSeq(topic, events.at(-1)?.seq ?? 0);
        for (const event of events) {
          for (const s of topic.subscribers) {
            if (event.seq === s.lastSeq + 1 && !full(s)) {
              s.lastSeq = event.seq;
              s.undelivered++;
              // A slow consumer is not sent more than it can hold: its lastSeq stays put, and once it
              // has taken everything a new read fills it up from there.
              void s.push(event).then(() => {
                if (--s.undelivered === 0 && topic.latestSeq > s.lastSeq) this.wake(jobId);
              });
            }
          }
        }
        if (events.length < FETCH_PAGE) return;
      }
    } catch (err) {
      this.log.error({ err, jobId }, 'reading job events failed; the next wake-up or poll reads again');
    }
  }

  /**
   * Opens the LISTEN connection. Its 'end' handler is attached only once LISTEN is in place, so a
   * connection that fails while opening is cleaned up here and retried by the caller's one loop,
   * never also by its own 'end' (which pg emits for a failed connect too).
   */
  private async listen(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: 'onejob-listener',
      // A connect that hangs would hold up the one reconnect loop; a peer that vanishes without a
      // reset is noticed by TCP keep-alive (meanwhile the safety poll delivers).
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    client.on('notification', (msg) => {
      const [jobId, seq] = (msg.payload ?? '').split(':');
      const topic = jobId ? this.topics.get(jobId) : undefined;
      if (!topic) return;
      noteSeq(topic, Number(seq));
      this.wake(jobId!);
    });
    client.on('error', (err) => this.log.warn({ err }, 'event listener connection failed'));
    try {
      await client.connect();
      await client.query(`LISTEN ${JOB_EVENTS_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    if (this.stopped) {
      await client.end().catch(() => {}); // stop() ran while this connection was opening
      return;
    }
    this.listener = client;
    client.once('end', () => {
      if (this.listener === client) this.listener = undefined;
      this.scheduleReconnect();
    });
  }

  /** One reconnect loop at a time, however many failures and 'end's arrive. */
  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => void this.reconnect(), RECONNECT_DELAY_MS);
    this.reconnectTimer.unref();
  }

  private async reconnect(): Promise<void> {
    // The timer has fired. Until listen() succeeds nothing else schedules one: a connection that
    // fails while opening has no 'end' handler, and the lost connection's 'end' has come and gone.
    this.reconnectTimer = undefined;
    try {
      await this.listen();
      // Notifications sent while no connection listened are lost: read every watched job again.
      if (!this.stopped) this.wakeAll();
    } catch (err) {
      this.log.warn({ err }, 'event listener reconnect failed; trying again');
      this.scheduleReconnect();
    }
  }
}
