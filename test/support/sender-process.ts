// The sender in a process of its own, for what a process reads only at its start: the CAs of
// NODE_EXTRA_CA_CERTS, which is how an operator trusts a private CA (docs/webhooks.md). Reads
// {timeoutMs, hosts, urls} as JSON on stdin, sends one attempt to each URL in turn, and prints
// the SendResults as JSON. `hosts` answers the target check's lookups (name -> address), so a
// URL can name the host its certificate is for and still reach a loopback server.
import { createSender } from "../../src/delivery/sender.ts";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";

const chunks: Buffer[] = [];
for await (const c of process.stdin) chunks.push(c as Buffer);
const { timeoutMs, hosts, urls } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
  timeoutMs: number;
  hosts: Record<string, string>;
  /** A URL, or one with a body padded to that many bytes (a large event). */
  urls: (string | { url: string; bodyBytes: number })[];
};
const sender = createSender({
  timeoutMs,
  allowPrivate: true,
  lookup: async (host) => {
    const address = hosts[host];
    if (!address) throw Object.assign(new Error(`no such host ${host}`), { code: "ENOTFOUND" });
    return [{ address, family: address.includes(":") ? 6 : 4 }];
  },
});
const secret = generateWebhookSecret();
const body = JSON.stringify({ id: "evt_1", event_type: "user.created", created_at: "2026-11-21T10:00:00.123456789Z", project_id: "prj_1", data: {} });
const results = [];
for (const u of urls) {
  const [url, padded] = typeof u === "string" ? [u, body] : [u.url, body.replace("{}", JSON.stringify({ pad: "x".repeat(Math.max(0, u.bodyBytes - body.length - 10)) }))];
  results.push(await sender.send({ url, body: padded, eventId: "evt_1", eventType: "user.created", attempt: 1, secrets: { current: secret } }));
}
await sender.close();
process.stdout.write(JSON.stringify(results));
