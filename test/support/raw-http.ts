// HTTP/1.1 spoken by hand on a loopback socket: for what no client library sends (a body cut
// off, two Content-Lengths, Expect: 100-continue without waiting) and what a server answers then.
import { connect, type Socket } from "node:net";

export type Answer = { raw: string; status: number; headers: Record<string, string>; body: string };

/** Everything the server writes on one connection until it closes it (or `ms` pass). */
export function converse(port: number, script: (socket: Socket) => void, ms = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let raw = "";
    const socket = connect(port, "127.0.0.1", () => script(socket));
    socket.setEncoding("latin1");
    socket.on("data", (c: string) => (raw += c));
    socket.on("error", () => {}); // a reset after the answer, or the one the script sends
    socket.on("close", () => resolve(raw));
    setTimeout(() => (socket.destroy(), raw ? resolve(raw) : reject(new Error("no answer"))), ms).unref();
  });
}

/** The answer on a connection, after any interim `100 Continue`. */
export function lastAnswer(raw: string): Answer {
  const [head, body = ""] = raw.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "").split("\r\n\r\n");
  const [statusLine, ...lines] = head.split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  return { raw, status: Number(statusLine.split(" ")[1]), headers, body };
}
