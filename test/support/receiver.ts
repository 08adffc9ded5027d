// A real webhook receiver for tests: node:http on 127.0.0.1, an ephemeral port, programmable
// answers, and a record of every request's raw body bytes and headers.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { parseMasterKey, seal, type MasterKey } from "../../src/crypto.ts";
import type { Database } from "../../src/db/client.ts";
import { DELIVERY_CHANNEL, enqueue } from "../../src/webhooks/outbox.ts";
import { newId } from "../../src/ids.ts";
import type { EventType } from "../../src/webhooks/event-types.ts";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";

export type Behaviour = {
  /** Default 200. */
  status?: number;
  /** Wait this long before answering (the request is recorded at once). */
  delayMs?: number;
  /** Answer once this settles, after delayMs if both are given (the request is recorded at once): holds a send slot as long as the test needs. */
  until?: Promise<unknown>;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Drop the connection without answering. */
  hangUp?: boolean;
};

export type Receipt = {
  /** 1-based arrival order. */
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Date.now() when the body had fully arrived. */
  at: number;
};

export type Responder = (receipt: Receipt) => Behaviour | undefined;

export class TestReceiver {
  readonly receipts: Receipt[] = [];
  private queue: Behaviour[] = [];
  private responder: Responder | null = null;
  private fallback: Behaviour;
  private waiters = new Set<() => void>();
  private sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
    fallback: Behaviour,
  ) {
    this.fallback = fallback;
  }

  /** Starts a receiver; `fallback` answers when neither the queue nor a responder decides. */
  static async start(fallback: Behaviour = { status: 200 }, path = "/hook"): Promise<TestReceiver> {
    let self!: TestReceiver;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const receipt: Receipt = {
          n: self.receipts.length + 1,
          method: req.method ?? "",
          path: req.url ?? "",
          headers: req.headers,
          body: Buffer.concat(chunks),
          at: Date.now(),
        };
        self.receipts.push(receipt);
        const b = self.queue.shift() ?? self.responder?.(receipt) ?? self.fallback;
        for (const w of [...self.waiters]) w();
        const answer = () => {
          if (b.hangUp) {
            req.socket.destroy();
            return;
          }
          if (res.destroyed) return;
          res.writeHead(b.status ?? 200, { "content-type": "text/plain", ...b.headers });
          res.end(b.body ?? "ok");
        };
        const delayed = () => (b.delayMs ? void setTimeout(answer, b.delayMs).unref() : answer());
        if (b.until) void b.until.then(delayed, delayed);
        else delayed();
      });
    });
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    self = new TestReceiver(server, `http://127.0.0.1:${port}${path}`, fallback);
    server.on("connection", (s: Socket) => {
      self.sockets.add(s);
      s.on("close", () => self.sockets.delete(s));
    });
    return self;
  }

  /** The next requests get these answers, in order; then the responder or the fallback. */
  enqueue(...behaviours: Behaviour[]): this {
    this.queue.push(...behaviours);
    return this;
  }

  /** Decides the answer per request (after the queue is exhausted). */
  respond(fn: Responder | null): this {
    this.responder = fn;
    return this;
  }

  setFallback(b: Behaviour): this {
    this.fallback = b;
    return this;
  }

  /** Resolves with the receipts once at least `n` requests have arrived; rejects after `timeoutMs`. */
  waitFor(n: number, timeoutMs = 10_000): Promise<Receipt[]> {
    if (this.receipts.length >= n) return Promise.resolve(this.receipts.slice());
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.receipts.length >= n) {
          cleanup();
          resolve(this.receipts.slice());
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`receiver got ${this.receipts.length} of ${n} requests within ${timeoutMs} ms`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A loopback URL on which nothing listens (connection refused). */
export async function closedPortUrl(path = "/hook"): Promise<string> {
  return `http://127.0.0.1:${await closedPort()}${path}`;
}

/** A loopback port nothing listens on (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// ---- fixtures for the delivery tests ------------------------------------------------------------

export const newMasterKey = (): MasterKey => parseMasterKey(randomBytes(32).toString("base64"));

export type SeededWebhook = { projectId: string; webhookId: string; secret: string; previousSecret?: string };

/** A project (unless given) and one webhook subscribed to `events`, its secret sealed like the API does. */
export async function seedWebhook(
  db: Pick<Database, "prisma">,
  masterKey: MasterKey,
  opts: { url: string; projectId?: string; events?: EventType[]; previous?: { secret: string; expiresAt: Date }; enabled?: boolean },
): Promise<SeededWebhook> {
  const projectId = opts.projectId ?? newId("prj");
  if (!opts.projectId) await db.prisma.project.create({ data: { id: projectId, name: `test ${projectId}` } });
  const secret = generateWebhookSecret();
  const webhookId = newId("wh");
  await db.prisma.webhook.create({
    data: {
      id: webhookId,
      projectId,
      url: opts.url,
      events: opts.events ?? ["user.created"],
      enabled: opts.enabled ?? true,
      secretSealed: seal(masterKey, secret),
      previousSecretSealed: opts.previous ? seal(masterKey, opts.previous.secret) : null,
      previousSecretExpiresAt: opts.previous?.expiresAt ?? null,
    },
  });
  return { projectId, webhookId, secret, previousSecret: opts.previous?.secret };
}

/** Enqueues `count` events in one business transaction each (chunks of `perTx` per transaction). */
export async function enqueueEvents(
  db: Pick<Database, "prisma">,
  projectId: string,
  count = 1,
  opts: { eventType?: EventType; perTx?: number; test?: { webhookId: string } } = {},
): Promise<string[]> {
  const ids: string[] = [];
  const perTx = opts.perTx ?? 1;
  for (let done = 0; done < count; done += perTx) {
    const n = Math.min(perTx, count - done);
    const batch = await db.prisma.$transaction(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        out.push(await enqueue(tx, { projectId, eventType: opts.eventType ?? "user.created", data: { user: { user_id: `acc_${done + i}` } }, test: opts.test }));
      }
      return out;
    });
    ids.push(...batch);
  }
  return ids;
}

/**
 * What enqueue() writes (events and their fan-out to the project's enabled webhooks), for
 * `count` events in one statement, then NOTIFY: for load tests, where enqueue() through Prisma
 * (~2 ms an event) would dominate. The body is a valid envelope with `data: {}`.
 */
export async function bulkEnqueue(db: Pick<Database, "prisma">, projectId: string, count: number): Promise<string[]> {
  const rows = await db.prisma.$queryRaw<{ id: string }[]>`
    WITH ev AS (
      INSERT INTO outbox_events (id, project_id, event_type, body)
      SELECT x.id, ${projectId}, 'user.created',
             json_build_object('id', x.id, 'event_type', 'user.created', 'created_at', now(), 'project_id', ${projectId}::text, 'data', '{}'::json)::text
      FROM (SELECT 'evt_' || replace(gen_random_uuid()::text, '-', '') AS id FROM generate_series(1, ${count}::int)) x
      RETURNING id
    ),
    fan AS (
      INSERT INTO deliveries (id, event_id, webhook_id, project_id, event_type)
      SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), ev.id, w.id, w.project_id, 'user.created'
      FROM ev JOIN webhooks w ON w.project_id = ${projectId} AND w.enabled
    )
    SELECT id FROM ev`;
  await db.prisma.$executeRaw`SELECT pg_notify(${DELIVERY_CHANNEL}, '')`;
  return rows.map((r) => r.id);
}

/**
 * Reads until `ok` holds or `ms` pass, and returns the last value read either way: the caller's
 * assertion on it then says what was seen (notices, for one, are sent after the change by a
 * sender of their own).
 */
export async function until<T>(read: () => T | Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Polls `fn` until it returns a truthy value; rejects after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T | null | undefined | false>, timeoutMs = 10_000, what = "condition"): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
