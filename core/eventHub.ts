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
}

export class JobEventHub {
  private readonly topics = new Map<string, Topic>();
  /** The highest seq seen per watched job, from notifications and reads. */
  private readonly latestSeq = new Map<string, number>();
  private listener: pg.Client | undefined;
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
    await this.listener?.end().catch(() => {});
    await Promise.all([...this.topics.values()].map((t) => t.reading));
  }

  /** Every stored event of the job after `afterSeq`, then live ones, until the consumer stops. */
  subscribe(jobId: string, afterSeq: number): AsyncIterableIterator<JobEvent> {
    return new Repeater<JobEvent>(async (push, stopped) => {
      const subscriber: Subscriber = { lastSeq: afterSeq, undelivered: 0, push };
      let topic = this.topics.get(jobId);
      if (!topic) {
        topic = { subscribers: new Set(), reading: undefined, readAgain: false };
        this.topics.set(jobId, topic);
      }
      // Registered before the first read: a change committed from here on wakes a read that includes it.
      topic.subscribers.add(subscriber);
      this.wake(jobId);
      await stopped;
      topic.subscribers.delete(subscriber);
      if (topic.subscribers.size === 0 && this.topics.get(jobId) === topic) {
        this.topics.delete(jobId);
        this.latestSeq.delete(jobId);
      }
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

  private behind(jobId: string, s: Subscriber): boolean {
    return (this.latestSeq.get(jobId) ?? 0) > s.lastSeq;
  }

  private wakeAll(): void {
    for (const jobId of this.topics.keys()) this.wake(jobId);
  }

  private noteSeq(jobId: string, seq: number): void {
    if (seq > (this.latestSeq.get(jobId) ?? 0)) this.latestSeq.set(jobId, seq);
  }

  private async read(jobId: string, topic: Topic): Promise<void> {
    try {
      for (;;) {
        if (topic.subscribers.size === 0) return;
        const from = Math.min(...[...topic.subscribers].map((s) => s.lastSeq));
        const events = await eventsAfter(this.pool, jobId, from, FETCH_PAGE);
        this.noteSeq(jobId, events.at(-1)?.seq ?? 0);
        for (const event of events) {
          for (const s of topic.subscribers) {
            if (event.seq === s.lastSeq + 1 && s.undelivered < MAX_UNDELIVERED_PER_SUBSCRIBER) {
              s.lastSeq = event.seq;
              s.undelivered++;
              // A slow consumer is not sent more than it can hold: its lastSeq stays put, and once it
              // has taken everything a new read fills it up from there.
              void s.push(event).then(() => {
                if (--s.undelivered === 0 && this.behind(jobId, s)) this.wake(jobId);
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

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, application_name: 'onejob-listener' });
    client.on('notification', (msg) => {
      const [jobId, seq] = (msg.payload ?? '').split(':');
      if (!jobId || !this.topics.has(jobId)) return;
      this.noteSeq(jobId, Number(seq));
      this.wake(jobId);
    });
    client.on('error', (err) => this.log.warn({ err }, 'event listener connection failed'));
    client.on('end', () => {
      if (this.stopped) return;
      this.listener = undefined;
      setTimeout(() => this.reconnect(), RECONNECT_DELAY_MS).unref();
    });
    await client.connect();
    await client.query(`LISTEN ${JOB_EVENTS_CHANNEL}`);
    this.listener = client;
  }

  private async reconnect(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.listen();
      this.wakeAll(); // notifications sent while we were away are lost: read everything watched
    } catch (err) {
      this.log.warn({ err }, 'event listener reconnect failed; trying again');
      setTimeout(() => this.reconnect(), RECONNECT_DELAY_MS).unref();
    }
  }
}
