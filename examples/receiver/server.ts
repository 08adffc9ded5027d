import { createServer, type Server } from "node:http";
import { pathToFileURL } from "node:url";
import { verifyWebhook } from "../../packages/receiver/src/index.ts"; // in your app: "@linkgate/receiver"

const MAX_BODY = 1024 * 1024;

/** A webhook endpoint that accepts only deliveries signed with one of `secrets`. */
export function createReceiver(secrets: string[], onEvent: (event: { id: string; event_type: string }) => void = () => {}): Server {
  // verifyWebhook throws on a malformed secret before it reads a request (docs/receiver.md, "Verify
  // a delivery"): checked here, a bad secret stops the receiver being made instead of throwing
  // inside a request handler at the first delivery.
  verifyWebhook("", {}, secrets);
  return createServer((req, res) => {
    const reply = (status: number, body: object) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (req.method !== "POST") return reply(405, { error: "method_not_allowed" });
    // Keep the raw bytes: signatures cover them exactly, and a re-serialized body would not verify.
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) return void chunks.push(chunk);
      reply(413, { error: "too_large" });
      req.destroy();
    });
    req.on("end", () => {
      const result = verifyWebhook(Buffer.concat(chunks), req.headers, secrets);
      if (!result.ok) return reply(result.error.status, { error: result.error.code });
      // Delivery is at-least-once: a real receiver dedupes on envelope.id before acting.
      onEvent(result.envelope);
      reply(200, { received: result.envelope.id });
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secrets = (process.env.WEBHOOK_SECRETS ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  if (secrets.length === 0) throw new Error("set WEBHOOK_SECRETS to one or more comma-separated whsec_ secrets");
  const port = Number(process.env.PORT ?? 3000);
  createReceiver(secrets).listen(port, () => console.log(`webhook receiver listening on :${port}`));
}
