// A V8 CPU profile of one instance, summarised by where the self time went: which package, which
// project file, which function. Used for the optional profiled window of the throughput phase.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  samples: number;
  durationMs: number;
  /** Self time by area (package, project file, or a V8 pseudo-frame), in percent of all samples. */
  byArea: { area: string; pct: number }[];
  byFunction: { fn: string; pct: number }[];
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function areaOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native/V8 builtins)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  let file = url;
  try {
    if (url.startsWith('file:')) file = fileURLToPath(url);
  } catch {
    /* keep the raw url */
  }
  const nm = file.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = file.slice(nm + 'node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  if (file.startsWith(ROOT)) return path.relative(ROOT, file);
  return file;
}

export function summarizeProfile(p: CpuProfile, top = 15): ProfileSummary {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const id of p.samples) {
    const node = byId.get(id);
    if (!node) continue;
    const { url, functionName, lineNumber } = node.callFrame;
    const area = areaOf(url, functionName);
    areas.set(area, (areas.get(area) ?? 0) + 1);
    const fn = `${functionName || '(anonymous)'} ${area}${url ? `:${lineNumber + 1}` : ''}`;
    fns.set(fn, (fns.get(fn) ?? 0) + 1);
  }
  const total = p.samples.length || 1;
  const rank = (m: Map<string, number>) =>
    [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, v]) => ({ k, pct: (100 * v) / total }));
  return {
    samples: p.samples.length,
    durationMs: (p.endTime - p.startTime) / 1000,
    byArea: rank(areas).map(({ k, pct }) => ({ area: k, pct })),
    byFunction: rank(fns).map(({ k, pct }) => ({ fn: k, pct })),
  };
}
