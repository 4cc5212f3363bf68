// What Postgres does for the bench database during a window: CPU time of the backends serving it
// (from /proc, so only when Postgres runs on this machine, as it does on loopback) and what its
// active backends wait on (pg_stat_activity sampled every 100 ms; "CPU" = active, waiting on nothing).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';

const SAMPLE_MS = 100;

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** utime + stime of a process in seconds; undefined when it cannot be read. */
function processCpuS(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may contain spaces), counted from field 3 (state).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

export interface PgWindow {
  /** CPU seconds of the backends connected to the bench database; undefined when /proc cannot tell. */
  backendCpuS: number | undefined;
  /** Share of sampled active-backend states, biggest first. */
  waits: { what: string; pct: number }[];
  /** Mean number of active backends per sample. */
  meanActive: number;
}

export class PgMonitor {
  private constructor(private readonly client: pg.Client) {}

  static async open(databaseUrl: string): Promise<PgMonitor> {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'onejob-bench-monitor' });
    client.on('error', () => {}); // e.g. terminated by DROP DATABASE ... WITH (FORCE) after an interrupt
    await client.connect();
    return new PgMonitor(client);
  }

  private async backendPids(): Promise<number[]> {
    const { rows } = await this.client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows.map((r) => r.pid);
  }

  private async cpuOf(pids: number[]): Promise<Map<number, number> | undefined> {
    const m = new Map<number, number>();
    for (const pid of pids) {
      const s = processCpuS(pid); // undefined: exited meanwhile, or Postgres is not on this machine
      if (s !== undefined) m.set(pid, s);
    }
    return pids.length > 0 && m.size === 0 ? undefined : m;
  }

  async start(): Promise<{ end(): Promise<PgWindow> }> {
    const cpu0 = await this.cpuOf(await this.backendPids());
    const counts = new Map<string, number>();
    let samples = 0;
    let active = 0;
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      this.client
        .query<{ what: string; n: number }>(
          `SELECT CASE WHEN wait_event IS NULL THEN 'CPU' ELSE wait_event_type || ':' || wait_event END AS what, count(*)::int AS n
           FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
           GROUP BY 1`,
        )
        .then(({ rows }) => {
          samples++;
          for (const r of rows) {
            counts.set(r.what, (counts.get(r.what) ?? 0) + r.n);
            active += r.n;
          }
        }, () => {})
        .finally(() => (busy = false));
    }, SAMPLE_MS);
    return {
      end: async () => {
        clearInterval(timer);
        const cpu1 = await this.cpuOf(await this.backendPids());
        let backendCpuS: number | undefined;
        if (cpu0 && cpu1) {
          backendCpuS = 0;
          for (const [pid, s] of cpu1) backendCpuS += s - (cpu0.get(pid) ?? 0);
        }
        const total = [...counts.values()].reduce((s, v) => s + v, 0) || 1;
        return {
          backendCpuS,
          waits: [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([what, n]) => ({ what, pct: (100 * n) / total })),
          meanActive: samples ? active / samples : 0,
        };
      },
    };
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => {});
  }
}
