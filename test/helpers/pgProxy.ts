// A TCP proxy in front of Postgres, for network failures on demand: drop the connections of one
// application_name, or refuse new connections (each refused one recorded with its application_name, read
// from the startup message) until told to let them through again.
import net from 'node:net';
import { afterAll } from 'vitest';

interface Piped {
  client: net.Socket;
  upstream: net.Socket;
  applicationName: string | undefined;
}

export interface PgProxy {
  /** The database URL with the proxy's host and port. */
  url: string;
  /** When true, every new connection is closed right after its startup message. */
  refusing: boolean;
  /** Connections refused so far: when, and which application_name they announced. */
  readonly refused: { at: number; applicationName: string | undefined }[];
  /** Connections passed through so far, by application_name. */
  readonly accepted: { at: number; applicationName: string | undefined }[];
  /** Open piped connections with this application_name. */
  open(applicationName: string): number;
  /** Cuts every open connection with this application_name, as a network failure would. */
  drop(applicationName: string): number;
  close(): Promise<void>;
}

/** The application_name of a StartupMessage (protocol 3.0: int32 length, int32 196608, then key\0value\0 pairs). */
function startupApplicationName(packet: Buffer): string | undefined {
  const fields = packet.subarray(8).toString('utf8').split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'application_name') return fields[i + 1];
  return undefined;
}

export async function startPgProxy(databaseUrl: string): Promise<PgProxy> {
  const target = new URL(databaseUrl);
  const targetHost = target.hostname;
  const targetPort = Number(target.port || 5432);
  const piped = new Set<Piped>();
  const refused: PgProxy['refused'] = [];
  const accepted: PgProxy['accepted'] = [];
  const sockets = new Set<net.Socket>();

  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      if (head.length < 4 || head.length < head.readInt32BE(0)) return; // the startup message is not complete
      client.off('data', onData);
      client.pause();
      const applicationName = startupApplicationName(head.subarray(0, head.readInt32BE(0)));
      if (proxy.refusing) {
        refused.push({ at: Date.now(), applicationName });
        client.destroy();
        return;
      }
      accepted.push({ at: Date.now(), applicationName });
      const upstream = net.connect(targetPort, targetHost);
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      const entry: Piped = { client, upstream, applicationName };
      piped.add(entry);
      const end = () => {
        piped.delete(entry);
        client.destroy();
        upstream.destroy();
      };
      upstream.on('error', end);
      upstream.on('close', end);
      client.on('close', end);
      upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);

  const proxy: PgProxy = {
    url: url.toString(),
    refusing: false,
    refused,
    accepted,
    open: (name) => [...piped].filter((p) => p.applicationName === name).length,
    drop(name) {
      let n = 0;
      for (const p of [...piped]) {
        if (p.applicationName !== name) continue;
        p.client.destroy();
        p.upstream.destroy();
        piped.delete(p);
        n++;
      }
      return n;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  afterAll(() => proxy.close());
  return proxy;
}
