// Gateways sharing a Postgres database must name one issuer (docs/configuration.md): without
// LINKGATE_ISSUER each would name itself http://HOST:PORT and refuse the other's tokens. The first
// such gateway runs; a second one refuses to start, saying which variable to set; with the
// variable set, any number start, and none with another issuer (or none) joins them.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimIssuer, IssuerNotShared } from "../src/auth/issuer.ts";
import { openTestDatabase, serverUrl, type TestDatabase } from "./support/db.ts";
import { MAIN } from "./support/server-entry.ts";

const ROOT = path.resolve(import.meta.dirname, "..");

type Gateway = { child: ChildProcess; output: () => string; exited: Promise<number | null>; listening: Promise<boolean> };

describe.skipIf(!serverUrl)(`gateways on one Postgres database${serverUrl ? "" : " (skipped: needs TEST_DATABASE_URL)"}`, () => {
  let db: TestDatabase;
  const secretKey = randomBytes(32).toString("base64");
  const running: Gateway[] = [];

  beforeAll(async () => {
    db = await openTestDatabase("postgres");
  });
  afterAll(async () => {
    for (const g of running) if (g.child.exitCode === null) g.child.kill("SIGTERM");
    await Promise.all(running.map((g) => g.exited));
    await db?.close();
  });

  /** `npm start`'s entry on the shared database; `listening` settles on its listening line or its exit. */
  function gateway(env: Record<string, string> = {}): Gateway {
    const child = spawn(process.execPath, [MAIN], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        PORT: "0",
        DATABASE_URL: db.url!,
        LINKGATE_SECRET_KEY: secretKey,
        LINKGATE_DATA_DIR: mkdtempSync(path.join(tmpdir(), "linkgate-issuer-")),
        LINKGATE_WORKER: "0",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const listening = new Promise<boolean>((resolve) => {
      child.stdout!.on("data", (c) => {
        out += c;
        if (out.includes("linkgate listening")) resolve(true);
      });
      child.stderr!.on("data", (c) => (out += c));
      void exited.then(() => resolve(false));
    });
    const g = { child, output: () => out, exited, listening };
    running.push(g);
    return g;
  }

  it("a second gateway without LINKGATE_ISSUER refuses to start and names the variable", async () => {
    const first = gateway();
    expect(await first.listening, first.output()).toBe(true);

    const second = gateway();
    expect(await second.listening).toBe(false);
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(/^linkgate: another linkgate gateway already serves this database without LINKGATE_ISSUER.*set LINKGATE_ISSUER/m);

    // 25th review: one with the variable set started beside it, and each refused the other's tokens
    const named = gateway({ LINKGATE_ISSUER: "https://auth.example" });
    expect(await named.listening).toBe(false);
    expect(await named.exited).toBe(1);
    expect(named.output()).toMatch(/^linkgate: a linkgate gateway serving this database names its tokens' issuer http:\/\/localhost:\d+, and this one would name them https:\/\/auth\.example:/m);

    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
  });

  it("with LINKGATE_ISSUER set, any number start on the same issuer; one on another issuer, or without it, refuses", async () => {
    const a = gateway({ LINKGATE_ISSUER: "https://auth.example" });
    const b = gateway({ LINKGATE_ISSUER: "https://auth.example" });
    expect(await a.listening, a.output()).toBe(true);
    expect(await b.listening, b.output()).toBe(true);

    const unnamed = gateway();
    expect(await unnamed.exited).toBe(1);
    expect(unnamed.output()).toMatch(/^linkgate: .*names its tokens' issuer https:\/\/auth\.example, and this one would name them http:\/\/localhost:\d+ \(LINKGATE_ISSUER is unset\)/m);
    const other = gateway({ LINKGATE_ISSUER: "https://other.example" });
    expect(await other.exited).toBe(1);
    expect(other.output()).toMatch(/^linkgate: .*names its tokens' issuer https:\/\/auth\.example, and this one would name them https:\/\/other\.example:/m);

    // once they have stopped, the database is free for a gateway without the variable
    for (const g of [a, b]) g.child.kill("SIGTERM");
    expect(await Promise.all([a.exited, b.exited])).toEqual([0, 0]);
    const alone = gateway();
    expect(await alone.listening, alone.output()).toBe(true);
  });

  // 31st review: after a restart of the server (or its connection ended), the lock was gone for
  // good, and a gateway with another issuer started beside this one unrefused
  it("a gateway whose lock connection the server ended takes its issuer's lock again", async () => {
    for (const g of running) if (g.child.exitCode === null) g.child.kill("SIGTERM");
    await Promise.all(running.map((g) => g.exited));
    const issuer = "https://kept.example";
    const claim = await claimIssuer(db.url!, issuer, true);
    try {
      const holders = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'linkgate issuer ${issuer}'`;
      await db.prisma.$executeRawUnsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'linkgate issuer ${issuer}'`);
      // taken again within a few reclaim intervals (every second); bounded at 15 s
      let back = false;
      for (let i = 0; i < 150 && !back; i++) {
        await new Promise((r) => setTimeout(r, 100));
        back = (await db.prisma.$queryRawUnsafe<{ n: number }[]>(holders))[0].n === 1;
      }
      expect(back).toBe(true);
      await expect(claimIssuer(db.url!, "https://other.example", true)).rejects.toBeInstanceOf(IssuerNotShared);
    } finally {
      await claim.release();
    }
  });

  // 34th review: a reconnection that met a server accepting connections and never answering
  // (a partition, a proxy in front of a database that is down) waited for ever; once the database
  // answered again nothing asked for the lock, and a gateway with another issuer started unrefused
  it("a gateway whose reconnection met a silent server takes its issuer's lock again once the database answers", async () => {
    for (const g of running) if (g.child.exitCode === null) g.child.kill("SIGTERM");
    await Promise.all(running.map((g) => g.exited));
    const target = new URL(db.url!);
    let forward = true;
    let silentConnections = 0;
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      sockets.add(client);
      client.on("error", () => {});
      client.on("close", () => sockets.delete(client));
      if (!forward) return void silentConnections++; // accepted, never answered
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      sockets.add(upstream);
      upstream.on("error", () => {});
      upstream.on("close", () => (sockets.delete(upstream), client.destroy()));
      client.on("close", () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", () => resolve()));
    const viaProxy = new URL(db.url!);
    viaProxy.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;

    const issuer = "https://partitioned.example";
    const claim = await claimIssuer(viaProxy.toString(), issuer, true, { connectTimeoutMs: 500 });
    try {
      const holders = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'linkgate issuer ${issuer}'`;
      const held = async () => (await db.prisma.$queryRawUnsafe<{ n: number }[]>(holders))[0].n === 1;
      expect(await held()).toBe(true);
      // the partition: the lock's connection is cut, and its reconnection meets silence
      forward = false;
      for (const s of sockets) s.destroy();
      while (silentConnections === 0) await new Promise((r) => setTimeout(r, 50));
      forward = true;
      // taken again once the database answers (bounded at 30 s; it takes a second or so)
      let back = false;
      for (let i = 0; i < 300 && !back; i++) {
        await new Promise((r) => setTimeout(r, 100));
        back = await held();
      }
      expect(back).toBe(true);
      await expect(claimIssuer(db.url!, "https://other.example", true)).rejects.toBeInstanceOf(IssuerNotShared);
    } finally {
      await claim.release();
      proxy.close();
      for (const s of sockets) s.destroy();
    }
  }, 60_000);

  // 35th review: a database that answered the start's reachability check and went silent before
  // the issuer's lock was taken ended the start after the connect timeout with a stack trace
  it("a database gone silent between the start's check and the issuer's lock ends the start with one line", async () => {
    const target = new URL(db.url!);
    let connections = 0;
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      sockets.add(client);
      client.on("error", () => {});
      if (++connections > 1) return; // the check's connection is forwarded; later ones meet silence
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      sockets.add(upstream);
      upstream.on("error", () => {});
      upstream.on("close", () => client.destroy());
      client.on("close", () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", () => resolve()));
    const viaProxy = new URL(db.url!);
    viaProxy.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    try {
      const g = gateway({ DATABASE_URL: viaProxy.toString() });
      expect(await g.listening).toBe(false);
      expect(await g.exited).toBe(1);
      expect(connections).toBe(2);
      const said = g.output().trim();
      expect(said).toMatch(/^linkgate: cannot take the issuer's lock on the database at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\S+: .*timeout/i);
      expect(said.split("\n")).toHaveLength(1);
      expect(said).not.toMatch(/\n\s+at /);
    } finally {
      proxy.close();
      for (const s of sockets) s.destroy();
    }
  }, 60_000);
});
