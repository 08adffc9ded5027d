// A name server on loopback (UDP) for the webhook guard's own resolver: it answers A queries for
// the names it is given, answers "no records" for other types of those names, NXDOMAIN for
// names it does not know, and never answers the names it is told to ignore, as a name server
// that is down or a domain whose owner made it hang.
import { createSocket, type Socket } from "node:dgram";
import * as packet from "dns-packet";

export type NameServer = { address: string; queries: string[]; close(): Promise<void> };

/** `ttl`: the TTL of the answers for a name, in seconds (60 unless given). */
export async function startNameServer(opts: { a?: Record<string, string[]>; silent?: string[]; ttl?: Record<string, number> }): Promise<NameServer> {
  const socket: Socket = createSocket("udp4");
  const queries: string[] = [];
  socket.on("message", (msg, from) => {
    const query = packet.decode(msg);
    const q = query.questions?.[0];
    if (!q) return;
    const name = q.name.toLowerCase();
    queries.push(`${q.type} ${name}`);
    if (opts.silent?.includes(name)) return;
    const known = opts.a?.[name];
    const answers = known && q.type === "A" ? known.map((data) => ({ type: "A" as const, name: q.name, ttl: opts.ttl?.[name] ?? 60, data })) : [];
    const reply = packet.encode({
      type: "response",
      id: query.id,
      flags: packet.RECURSION_DESIRED | packet.RECURSION_AVAILABLE | (known ? 0 : 3), // rcode 3: NXDOMAIN
      questions: query.questions,
      answers,
    });
    socket.send(reply, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
