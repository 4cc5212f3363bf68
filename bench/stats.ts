// Small numeric helpers for the bench: percentiles, formatting, and CPU accounting.
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface Summary {
  n: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const sum = sorted.reduce((s, v) => s + v, 0);
  return {
    n: sorted.length,
    min: sorted[0] ?? Number.NaN,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.at(-1) ?? Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

export const ms = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(v < 10 ? 2 : 1)} ms` : 'n/a');
export const num = (v: number, digits = 0): string =>
  Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a';

export function latencyLine(s: Summary): string {
  return `p50 ${ms(s.p50)}  p90 ${ms(s.p90)}  p99 ${ms(s.p99)}  max ${ms(s.max)}  (n=${num(s.n)})`;
}

/** Busy and total jiffies of the whole machine from /proc/stat (Linux); undefined elsewhere. */
function machineTicks(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((s, v) => s + v, 0);
    const idle = (f[3] ?? 0) + (f[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

export interface CpuWindow {
  /** Ends the window: seconds of wall time and CPU seconds used by this process and the whole machine. */
  end(): { wallS: number; selfCpuS: number; machineCpuS: number | undefined };
}

export function cpuWindow(): CpuWindow {
  const t0 = performance.now();
  const self0 = process.cpuUsage();
  const m0 = machineTicks();
  return {
    end() {
      const wallS = (performance.now() - t0) / 1000;
      const self = process.cpuUsage(self0);
      const m1 = machineTicks();
      let machineCpuS: number | undefined;
      if (m0 && m1 && m1.total > m0.total) {
        machineCpuS = ((m1.busy - m0.busy) / (m1.total - m0.total)) * wallS * os.cpus().length;
      }
      return { wallS, selfCpuS: (self.user + self.system) / 1e6, machineCpuS };
    },
  };
}
