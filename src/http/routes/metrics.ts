// GET /metrics: the Prometheus text exposition (src/metrics.ts), plus the HTTP middleware
// that counts every request by its route pattern.
//
// Who may scrape: with LINKGATE_METRICS_TOKEN set, whoever sends it as a bearer token (from
// anywhere, loopback included); without it, loopback clients only. The client address is the
// one the abuse limits use (src/http/client-address.ts): behind LINKGATE_TRUSTED_PROXIES it is
// the forwarded client, so a local reverse proxy does not make the whole internet "loopback".
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import { matchedRoutes, routePath } from "hono/route";
import { COMPOSED_HANDLER } from "hono/utils/constants";
import proxyaddr from "proxy-addr";
import { safeEqual } from "../../crypto.ts";
import { Forbidden, Unauthenticated } from "../../errors.ts";
import { readBacklog } from "../../delivery/pending.ts";
import { metrics, renderMetrics } from "../../metrics.ts";
import { NO_SOCKET } from "../client-address.ts";
import type { AppEnv } from "../env.ts";

const isLoopback = proxyaddr.compile("loopback");

export function metricsRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/metrics", async (c) => {
    authorizeScrape(c);
    const db = c.get("deps").prisma;
    const { contentType, body } = await renderMetrics(() => readBacklog(db), (err) => c.get("log").warn({ err }, "metrics: backlog query failed"));
    return c.body(body, 200, { "Content-Type": contentType, "Cache-Control": "no-store" });
  });
  return r;
}

function authorizeScrape(c: Context<AppEnv>): void {
  const token = c.get("deps").config.metricsToken;
  if (token) {
    const presented = /^Bearer (.+)$/i.exec(c.req.header("authorization") ?? "")?.[1]?.trim();
    if (!presented || !safeEqual(presented, token)) throw new Unauthenticated("send the metrics token as Authorization: Bearer <LINKGATE_METRICS_TOKEN>");
    return;
  }
  const address = c.get("clientAddress");
  if (address !== NO_SOCKET && !isLoopback(address, 0)) {
    throw new Forbidden("metrics are served to loopback clients only; set LINKGATE_METRICS_TOKEN to scrape from elsewhere");
  }
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * Counts and times every request under the route pattern that answered it ("/webhooks/:id",
 * never the raw path), so the label set is bounded by the routes the app defines. When no
 * handler answered, the last route that ran is a middleware that called next() and the app's
 * not-found handler replied: that is "unmatched", whatever path was asked for.
 */
export function httpMetrics(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    await next(); // errors are answered inside (app.onError), so this always has a response
    const labels = { method: METHODS.has(c.req.method) ? c.req.method : "other", route: answeringRoute(c) };
    metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
    metrics.httpRequests.inc({ ...labels, status: String(c.res.status) });
  };
}

function answeringRoute(c: Context): string {
  const route = matchedRoutes(c)[c.req.routeIndex];
  // Hono's own test for a middleware: it takes next (see hono/route's matchedRoutes example).
  // A sub-app with its own onError wraps each handler; the original is kept on the wrapper.
  const handler = route && ((route.handler as unknown as Record<string, unknown>)[COMPOSED_HANDLER] ?? route.handler);
  const middleware = typeof handler !== "function" || handler.length >= 2;
  if (middleware && c.res.status === 404) return "unmatched";
  return routePath(c) || "unmatched";
}
