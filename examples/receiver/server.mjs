// A webhook receiver in plain JavaScript, as an integrator writes it: install @linkgate/receiver
// from a tarball packed in a linkgate checkout (it is not on the npm registry: docs/receiver.md,
// "Install"), then `import { verifyWebhook } from "@linkgate/receiver"` (the package has no
// dependencies; it imports only node:crypto). test/receiver.package.test.ts runs this very file
// against the packed package.
//
//   WEBHOOK_SECRETS=whsec_... PORT=3000 node server.mjs
//
// WEBHOOK_SECRETS: one or more comma-separated secrets (during a rotation, the old and the new).
// WEBHOOK_SCHEME: `standard` (default: Standard Webhooks, whose signed timestamp refuses a replay),
// `legacy` (X-Service-Signature only) or `any` (either; no replay protection when the webhook-*
// headers are stripped); any other value refuses to start. HOST defaults to 0.0.0.0, PORT to 3000
// (0: any free port).
import { createServer } from "node:http";
import { verifyWebhook } from "@linkgate/receiver";

const MAX_BODY = 1024 * 1024;

const secrets = (process.env.WEBHOOK_SECRETS ?? "").split(",").map((s) => s.trim()).filter(Boolean);
if (secrets.length === 0) {
  console.error("set WEBHOOK_SECRETS to one or more comma-separated whsec_ secrets");
  process.exit(1);
}
const scheme = process.env.WEBHOOK_SCHEME ?? "standard";
// verifyWebhook throws a TypeError for an unknown scheme or a malformed secret before it reads a
// request (docs/receiver.md, "Verify a delivery"). One call now refuses to start on a
// misconfiguration instead of crashing at the first delivery; the message never holds a secret.
try {
  verifyWebhook("", {}, secrets, { scheme });
} catch (error) {
  console.error(error instanceof TypeError ? error.message : error);
  process.exit(1);
}

function handleEvent(envelope, usedScheme) {
  // Delivery is at-least-once: a real receiver records envelope.id and skips ids it has seen.
  console.log(`verified ${envelope.event_type} ${envelope.id} with the ${usedScheme} scheme`);
}

const server = createServer((req, res) => {
  const reply = (status, body) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  if (req.method !== "POST") return reply(405, { error: "method_not_allowed" });
  // Keep the raw bytes: the signatures cover them exactly, and a parsed and re-serialized
  // body would not verify.
  const chunks = [];
  let size = 0;
  req.on("data", (chunk) => {
    size += chunk.length;
    if (size <= MAX_BODY) return void chunks.push(chunk);
    reply(413, { error: "too_large" });
    req.destroy();
  });
  req.on("end", () => {
    const result = verifyWebhook(Buffer.concat(chunks), req.headers, secrets, { scheme });
    if (!result.ok) {
      console.log(`rejected: ${result.error.code}`);
      return reply(result.error.status, { error: result.error.code });
    }
    handleEvent(result.envelope, result.scheme);
    reply(200, { received: result.envelope.id });
  });
});

server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "0.0.0.0", () => {
  const { address, port } = server.address();
  console.log(`webhook receiver listening on http://${address}:${port}/`);
});
