// What the fake upstreams (test/support/upstream.ts, upstream-github.ts) share: a loopback HTTP
// server whose failures a test switches on (down, slow), and a user agent that runs an
// authorization on the upstream the way a browser would, up to the redirect back to the app.
import http, { type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type UpstreamControls = {
  /** the origin the upstream serves, e.g. http://127.0.0.1:41234; stays the same across down()/up() */
  origin: string;
  /** "GET /path" of every request that reached the upstream, for tests that assert it was (not) called */
  requests: string[];
  /** Refuses connections (ECONNREFUSED) on the same port until up(); open connections are cut. */
  down(): Promise<void>;
  up(): Promise<void>;
  /** Delays every response by `ms` from now on (0 turns it off): discovery, token, JWKS, user API. */
  slow(ms: number): void;
  /** Answers requests whose path starts with `pathPrefix` with `status` (a partial outage); null heals. */
  fail(pathPrefix: string | null, status?: number): void;
  /** Answers requests whose path starts with `pathPrefix` with `bytes` of JSON, in chunks of no declared length; null heals. */
  huge(pathPrefix: string | null, bytes?: number): void;
  stop(): Promise<void>;
};

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => unknown;

export async function startLoopbackServer(handler: Handler): Promise<UpstreamControls> {
  const requests: string[] = [];
  let delayMs = 0;
  let failing: { prefix: string; status: number } | null = null;
  let flooding: { prefix: string; bytes: number } | null = null;
  // Delayed requests whose timers a stop must clear, or the test process waits for them.
  const waiting = new Set<NodeJS.Timeout>();

  const server = http.createServer(async (req, res) => {
    requests.push(`${req.method} ${new URL(req.url ?? "/", "http://x").pathname}`);
    // No keep-alive: every request connects anew, so after down() the client's next request is
    // refused (ECONNREFUSED) instead of racing a pooled socket that the server just cut.
    res.shouldKeepAlive = false;
    if (delayMs > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => (waiting.delete(t), resolve()), delayMs);
        waiting.add(t);
      });
      if (req.socket.destroyed) return; // the caller gave up (its timeout), or down() cut the connection
    }
    if (failing && req.url?.startsWith(failing.prefix)) {
      res.writeHead(failing.status, { "content-type": "text/plain" }).end("upstream fixture: failing on purpose");
      return;
    }
    if (flooding && req.url?.startsWith(flooding.prefix)) {
      res.writeHead(200, { "content-type": "application/json" });
      const piece = Buffer.alloc(64 * 1024, 0x20);
      res.write("{");
      for (let sent = 0; sent < flooding.bytes && !res.destroyed; sent += piece.length) {
        if (!res.write(piece)) await writable(res);
      }
      res.end("}");
      return;
    }
    try {
      await handler(req, res);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`upstream fixture error: ${(err as Error).message}`);
    }
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => (server.off("error", reject), resolve()));
    });
  const close = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      server.closeAllConnections(); // requests in flight (slow) are cut, as in a real outage
    });

  await listen(0);
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    down: close,
    // Same port, so the issuer URL, and every URL the app learned from discovery, stay valid.
    up: () => (server.listening ? Promise.resolve() : listen(port)),
    slow(ms) {
      delayMs = ms;
    },
    fail(prefix, status = 503) {
      failing = prefix === null ? null : { prefix, status };
    },
    huge(prefix, bytes = 64 * 1024 * 1024) {
      flooding = prefix === null ? null : { prefix, bytes };
    },
    async stop() {
      for (const t of waiting) clearTimeout(t);
      waiting.clear();
      await close();
    },
  };
}

/**
 * Runs an authorization URL on the upstream like a browser with a fresh cookie jar: follows its
 * redirects while they stay on the upstream's origin and returns the first URL that leaves it
 * (the app's callback with code and state, or with error) without requesting it, so the test
 * decides what to send to the app. An upstream page that is not a redirect (an error page) throws.
 */
export async function followOnUpstream(origin: string, authorizationUrl: string | URL): Promise<URL> {
  const end = await walkOnUpstream(origin, authorizationUrl);
  if ("left" in end) return end.left;
  throw new Error(`the upstream answered ${end.status} at ${end.url.pathname} instead of redirecting: ${end.page.slice(0, 500)}`);
}

/**
 * The same run for an authorization asked with response_mode=form_post (Apple's): the upstream
 * ends on a page whose form posts the answer to the app's callback. Returns that form's target
 * and fields without submitting it, so the test decides what the browser posts.
 */
export async function formPostOnUpstream(origin: string, authorizationUrl: string | URL): Promise<{ action: URL; fields: URLSearchParams }> {
  const end = await walkOnUpstream(origin, authorizationUrl);
  if ("left" in end) throw new Error(`the upstream redirected to ${end.left.origin} instead of posting a form`);
  const form = /<form[^>]*method="post"[^>]*action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/i.exec(end.page);
  if (end.status !== 200 || !form) throw new Error(`the upstream answered ${end.status} at ${end.url.pathname} without a form to post: ${end.page.slice(0, 500)}`);
  const fields = new URLSearchParams();
  for (const input of form[2].matchAll(/<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"/gi)) fields.append(unescapeHtml(input[1]), unescapeHtml(input[2]));
  return { action: new URL(unescapeHtml(form[1]), end.url), fields };
}

const unescapeHtml = (s: string) =>
  s.replace(/&(amp|lt|gt|quot|#39|#x27|#x2F);/g, (_, e: string) => ({ amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'", "#x27": "'", "#x2F": "/" })[e]!);

/** Follows the upstream's redirects with a cookie jar: to the first URL off its origin, or to the first page that is not a redirect. */
async function walkOnUpstream(origin: string, start: string | URL): Promise<{ left: URL } | { status: number; url: URL; page: string }> {
  const jar = new Map<string, string>();
  let url = new URL(start);
  for (let hops = 0; hops < 20; hops++) {
    if (url.origin !== origin) return { left: url };
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(url, { redirect: "manual", headers: cookie ? { cookie } : {} });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const i = pair.indexOf("=");
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      if (!value || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name);
      else jar.set(name, value);
    }
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || !location) return { status: res.status, url, page: await res.text() };
    await res.body?.cancel();
    url = new URL(location, url);
  }
  throw new Error("the upstream redirected more than 20 times");
}

/** Resolves once `res` drains or closes; removes both listeners, so a long flood adds none per piece. */
function writable(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}
