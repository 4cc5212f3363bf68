// Counts the statements an instance sends to Postgres, for the bench only (bench/instance.ts turns it on
// when BENCH_COUNT_QUERIES=1; no app code changes). It hooks the app's pg Pool through its own events:
// every client the pool opens ('connect') gets its query() wrapped, so both pool.query() and the clients
// handed out by pool.connect() (BEGIN … COMMIT included) are seen. A "unit" is one checkout of a client
// ('acquire' → 'release'): one statement for pool.query(), a whole transaction for inTransaction().
// Units are counted by their statement sequence, so the parent can tell a claim from a settle.
// Connections outside the pool (the LISTEN clients of the runner and the event hub) are not counted.
import type pg from 'pg';

export interface QueryCounts {
  /** Statement texts (whitespace collapsed), indexed by the ids used in `units`. */
  labels: string[];
  /**
   * Checkouts by their statement sequence: ids joined by ",", each followed by "z" when the statement
   * answered rowCount 0 (an UPDATE that matched nothing, a SELECT that found nothing) and "!" when it failed.
   */
  units: Record<string, number>;
  statements: number;
}

interface Counted {
  /** The statements of the current checkout. */
  unit: string[];
}

export function countPoolQueries(pool: pg.Pool): { snapshot(): QueryCounts } {
  const ids = new Map<string, number>();
  const labels: string[] = [];
  const units = new Map<string, number>();
  let statements = 0;
  const idOf = (text: string): number => {
    let id = ids.get(text);
    if (id === undefined) {
      id = labels.length;
      labels.push(text.replace(/\s+/g, ' ').trim());
      ids.set(text, id);
    }
    return id;
  };
  const countedClients = new WeakMap<pg.PoolClient, Counted>();

  pool.on('connect', (client: pg.PoolClient) => {
    const counted: Counted = { unit: [] };
    countedClients.set(client, counted);
    const original = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const first = args[0];
      const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '(submittable)');
      const slot = counted.unit.length;
      counted.unit.push(String(idOf(text)));
      statements++;
      const mark = (err: unknown, res: { rowCount?: number | null } | undefined) => {
        if (err) counted.unit[slot] += '!';
        else if (res?.rowCount === 0) counted.unit[slot] += 'z';
      };
      const last = args.at(-1);
      if (typeof last === 'function') {
        // pool.query() calls client.query(text, values, callback).
        args[args.length - 1] = (err: unknown, res: { rowCount?: number | null } | undefined) => {
          mark(err, res);
          (last as (e: unknown, r: unknown) => void)(err, res);
        };
        return original(...args);
      }
      const result = original(...args);
      if (result && typeof (result as Promise<unknown>).then === 'function') {
        (result as Promise<{ rowCount?: number | null }>).then(
          (res) => mark(undefined, res),
          (err: unknown) => mark(err, undefined),
        );
      }
      return result;
    };
  });
  pool.on('acquire', (client: pg.PoolClient) => {
    const counted = countedClients.get(client);
    if (counted) counted.unit = [];
  });
  pool.on('release', (_err: Error | undefined, client: pg.PoolClient) => {
    const counted = countedClients.get(client);
    if (!counted || counted.unit.length === 0) return;
    // The callback of the last statement has run by now (release comes after it), so its marks are in.
    const key = counted.unit.join(',');
    units.set(key, (units.get(key) ?? 0) + 1);
    counted.unit = [];
  });

  return {
    snapshot: () => ({ labels: [...labels], units: Object.fromEntries(units), statements }),
  };
}
