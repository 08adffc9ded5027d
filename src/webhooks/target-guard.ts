import { BlockList, isIP } from "node:net";
import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup, Resolver } from "node:dns/promises";
import { ipv4From, ipv6Words } from "../ip.ts";

export interface ResolvedAddress {
  address: string;
  family: number;
}

export type LookupFn = (host: string) => Promise<ResolvedAddress[]>;

export type UnsafeTargetReason =
  | "invalid_url"
  | "scheme"
  | "credentials"
  | "blocked_hostname"
  | "blocked_address"
  | "unresolvable";

export class UnsafeWebhookTarget extends Error {
  readonly code = "InvalidWebhookUrl" as const;
  /** Lets the delivery worker tell a DNS hiccup (`unresolvable`) from a policy refusal. */
  readonly reason: UnsafeTargetReason;
  constructor(reason: UnsafeTargetReason, message: string) {
    super(message);
    this.name = "UnsafeWebhookTarget";
    this.reason = reason;
  }
}

type Rule = [label: string, cidrs: string[]];

// First matching label wins, so narrower classes come first.
const V4_RULES: Rule[] = [
  ["unspecified", ["0.0.0.0/8"]],
  ["loopback", ["127.0.0.0/8"]],
  ["private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]],
  ["link-local", ["169.254.0.0/16"]],
  ["carrier-grade NAT", ["100.64.0.0/10"]],
  ["multicast", ["224.0.0.0/4"]],
  ["broadcast", ["255.255.255.255/32"]],
  // Future use, IETF protocol assignments, documentation, benchmarking, and the deprecated 6to4
  // relay anycast (RFC 7526), which forwards to whatever IPv6 address a packet names.
  ["reserved", ["240.0.0.0/4", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "192.88.99.0/24"]],
];
const V6_RULES: Rule[] = [
  ["unspecified", ["::/128"]],
  ["loopback", ["::1/128"]],
  ["unique local", ["fc00::/7"]],
  ["link-local", ["fe80::/10"]],
  ["multicast", ["ff00::/8"]],
  // Teredo tunnels to an IPv4 address hidden (XORed) in the last 32 bits and through a relay
  // the gateway cannot vet; no webhook receiver needs one.
  ["Teredo", ["2001::/32"]],
  // Deprecated IPv4-compatible, site-local, documentation (both: RFC 3849 and RFC 9637),
  // discard (RFC 6666), the dummy prefix (IANA special-purpose registry), local-use NAT64,
  // benchmarking, ORCHID, and SRv6 segment identifiers (RFC 9602: inside an SRv6 domain they
  // steer packets).
  ["reserved", ["::/96", "fec0::/10", "2001:db8::/32", "3fff::/20", "100::/64", "100:0:0:1::/64", "64:ff9b:1::/48", "2001:2::/48", "2001:10::/28", "2001:20::/28", "5f00::/16"]],
];

function compile(rules: Rule[], type: "ipv4" | "ipv6"): [string, BlockList][] {
  return rules.map(([label, cidrs]) => {
    const list = new BlockList();
    for (const cidr of cidrs) {
      const [net, bits] = cidr.split("/");
      list.addSubnet(net, Number(bits), type);
    }
    return [label, list];
  });
}
const V4 = compile(V4_RULES, "ipv4");
const V6 = compile(V6_RULES, "ipv6");
// IPv4-mapped, IPv4-translated (SIIT, RFC 2765: ::ffff:0:a.b.c.d) and NAT64: the last 32 bits.
const EMBEDS_V4 = compile([["mapped", ["::ffff:0:0/96"]], ["translated", ["::ffff:0:0:0/96"]], ["nat64", ["64:ff9b::/96"]]], "ipv6");
const SIX_TO_FOUR = compile([["6to4", ["2002::/16"]]], "ipv6")[0][1];

/** Why `address` is not a public unicast address, or null when it is. */
export function classifyAddress(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return V4.find(([, list]) => list.check(address, "ipv4"))?.[0] ?? null;
  if (family !== 6) return "invalid";
  // Addresses that carry an IPv4 address are only as safe as that address.
  let embedded: string | null = null;
  if (EMBEDS_V4.some(([, list]) => list.check(address, "ipv6"))) {
    const w = ipv6Words(address);
    embedded = ipv4From(w[6], w[7]);
  } else if (SIX_TO_FOUR.check(address, "ipv6")) {
    const w = ipv6Words(address);
    embedded = ipv4From(w[1], w[2]);
  }
  if (embedded !== null) return classifyAddress(embedded);
  return V6.find(([, list]) => list.check(address, "ipv6"))?.[0] ?? null;
}

/** What a developer pointing a webhook at their own machine needs to know. */
const LOCAL_HINT = "; for local development, LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 allows private and loopback targets";

// Names that reach internal services without DNS telling us so (or before DNS is consulted).
const BLOCKED_NAMES = new Set(["metadata.google.internal", "localhost"]);

/**
 * The most addresses of each family the guard takes from an answer: only these are checked,
 * kept and connected to, so one bad address among them still refuses the host and the rest are
 * never reached. A DNS answer over TCP holds about 4,000 A records, and every address was
 * checked at every attempt (4,000 took 0.1 to 0.2 s of the event loop on a loaded 2-core
 * machine) and kept with the answer and with the sender's pinned addresses (a quarter of a MB
 * a host, for up to 10,000 hosts): one project's zone could stall every project's deliveries
 * and sign-ins, or fill a worker's memory. A load balancer's name answers with a handful (AWS's
 * with 8 at most), and a connection tries the addresses one after another (docs/webhooks.md,
 * "Which URLs are allowed").
 */
const ADDRESSES_PER_FAMILY = 16;

function firstOfEachFamily(addresses: ResolvedAddress[]): ResolvedAddress[] {
  const taken = new Map<number, number>();
  return addresses.filter(({ family }) => {
    const n = (taken.get(family) ?? 0) + 1;
    taken.set(family, n);
    return n <= ADDRESSES_PER_FAMILY;
  });
}

/**
 * How a host is resolved for the guard: DNS asked directly (c-ares, on the event loop), with a
 * bounded wait. The system resolver (getaddrinfo) runs on libuv's thread pool, which runs at most
 * two lookups at a time for the whole process: a webhook whose name server never answers held
 * one for the resolver's own timeouts (10 to 30 s) per attempt, and two of them stalled every
 * other lookup in the process, other projects' deliveries, codes' SMTP and identity providers
 * included (30th review). `servers` is for tests (a name server on loopback).
 */
export function dnsResolver(opts: { timeoutMs?: number; tries?: number; servers?: string[]; now?: () => number } = {}): LookupFn {
  const resolver = new Resolver({ timeout: opts.timeoutMs ?? 2_000, tries: opts.tries ?? 2 });
  if (opts.servers) resolver.setServers(opts.servers);
  return keptForTheirTtl(async (host) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host, { ttl: true }), resolver.resolve6(host, { ttl: true })]);
    const answers = [
      ...(v4.status === "fulfilled" ? v4.value.slice(0, ADDRESSES_PER_FAMILY).map(({ address, ttl }) => ({ address, family: 4, ttl })) : []),
      ...(v6.status === "fulfilled" ? v6.value.slice(0, ADDRESSES_PER_FAMILY).map(({ address, ttl }) => ({ address, family: 6, ttl })) : []),
    ];
    if (answers.length) return { addresses: answers.map(({ address, family }) => ({ address, family })), ttl: Math.min(...answers.map((a) => a.ttl)) };
    const failures = [v4, v6].flatMap((r) => (r.status === "rejected" ? [r.reason as NodeJS.ErrnoException] : []));
    throw failures.find((f) => f.code !== "ENODATA") ?? failures[0] ?? new Error("no addresses");
  }, opts.now ?? (() => performance.now()));
}

/** The longest an answer is kept, whatever its TTL says, and how many hosts' answers are kept. */
const MAX_KEPT_MS = 60_000;
const MAX_KEPT_HOSTS = 10_000;

/**
 * Every attempt is checked against DNS, and it used to ask the name servers twice (A and AAAA)
 * per attempt: 2,000 deliveries a second to one customer's host were 4,000 questions a second,
 * past what a cloud's resolver answers for one machine (AWS's: 1,024 packets a second per
 * interface), and the ones it dropped failed their attempts as timeouts. An answer is now used
 * for as long as its TTL allows (at most 60 s; a TTL of 0 is asked again every time), and
 * attempts that need one host at the same time share one question. The guard loses nothing:
 * an address is still checked before every connection, and connections go only to addresses
 * that were checked; a change of DNS is seen when the TTL its owner chose runs out, as any
 * resolver sees it. Failures are not kept.
 */
function keptForTheirTtl(ask: (host: string) => Promise<{ addresses: ResolvedAddress[]; ttl: number }>, now: () => number): LookupFn {
  const kept = new Map<string, { addresses: ResolvedAddress[]; until: number }>();
  const asking = new Map<string, Promise<ResolvedAddress[]>>();
  return (host) => {
    const known = kept.get(host);
    if (known && known.until > now()) return Promise.resolve(known.addresses);
    const pending = asking.get(host);
    if (pending) return pending;
    const answer = ask(host).then(
      ({ addresses, ttl }) => {
        asking.delete(host);
        kept.delete(host);
        const keepMs = Math.min(ttl * 1000, MAX_KEPT_MS);
        if (keepMs > 0) {
          // the oldest answer goes first: a Map iterates in insertion order
          if (kept.size >= MAX_KEPT_HOSTS) kept.delete(kept.keys().next().value!);
          kept.set(host, { addresses, until: now() + keepMs });
        }
        return addresses;
      },
      (err: unknown) => {
        asking.delete(host);
        throw err;
      },
    );
    asking.set(host, answer);
    return answer;
  };
}

const publicDns = dnsResolver();
// Local development (private targets allowed) asks the system resolver, as everything else on
// the machine does: /etc/hosts, search domains, mDNS. Such names could only lead to private
// addresses, which production refuses anyway, and one developer's machine has no other tenants.
const systemDns: LookupFn = (host) => dnsLookup(host, { all: true });

/** Resolves within `signal`'s life: a name server that never answers is a refusal, not a wait. */
async function resolveWithin(lookup: LookupFn, host: string, signal: AbortSignal | undefined): Promise<ResolvedAddress[]> {
  if (!signal) return lookup(host);
  signal.throwIfAborted();
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(Object.assign(new Error("the lookup took too long"), { code: "ETIMEOUT" }));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([lookup(host), aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/**
 * Refuses webhook URLs that could make the gateway talk to itself or its network (SSRF).
 * Used on create and before every delivery attempt, since DNS can change in between.
 * Returns the vetted addresses so the caller can connect to exactly those (no re-resolution).
 */
export async function assertSafeTarget(
  url: string,
  opts: { allowPrivate: boolean; lookup?: LookupFn; signal?: AbortSignal },
): Promise<ResolvedAddress[]> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UnsafeWebhookTarget("invalid_url", "webhook URL is not a valid absolute URL");
  }
  const schemes = opts.allowPrivate ? ["https:", "http:"] : ["https:"];
  if (!schemes.includes(parsed.protocol)) {
    const why = opts.allowPrivate ? "webhook URL must use http:// or https://" : "webhook URL must use https:// (for local development, LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 allows http:// and private addresses)";
    throw new UnsafeWebhookTarget("scheme", why);
  }
  if (parsed.username || parsed.password) {
    throw new UnsafeWebhookTarget("credentials", "webhook URL must not contain credentials (user:password@)");
  }
  // Port 0 reaches nothing: every attempt would fail, and no endpoint can be told about it.
  if (parsed.port === "0") throw new UnsafeWebhookTarget("invalid_url", "webhook URL must not name port 0");
  // The URL parser already canonicalised decimal/hex/octal IPv4 forms to dotted quads.
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "");
  if (!host) throw new UnsafeWebhookTarget("invalid_url", "webhook URL has no host");
  if (!opts.allowPrivate && (BLOCKED_NAMES.has(host) || host.endsWith(".localhost"))) {
    throw new UnsafeWebhookTarget("blocked_hostname", `webhook host ${host} is not allowed${LOCAL_HINT}`);
  }

  let addresses: ResolvedAddress[];
  const literal = isIP(host);
  if (literal) {
    addresses = [{ address: host, family: literal }];
  } else {
    try {
      // whatever resolved it (the system resolver in local development, a test's table)
      addresses = firstOfEachFamily(await resolveWithin(opts.lookup ?? (opts.allowPrivate ? systemDns : publicDns), host, opts.signal));
    } catch (err) {
      const code = (err as { code?: string }).code;
      throw new UnsafeWebhookTarget("unresolvable", `webhook host ${host} could not be resolved${code ? ` (${code})` : ""}`);
    }
    if (addresses.length === 0) throw new UnsafeWebhookTarget("unresolvable", `webhook host ${host} has no addresses`);
  }
  if (opts.allowPrivate) return addresses;

  // Any bad address refuses the host: the connection may pick any of them.
  for (const { address } of addresses) {
    const kind = classifyAddress(address);
    if (kind !== null) {
      const article = /^[aeiou]/.test(kind) ? "an" : "a";
      // A name's address is not said: the host is resolved by the operator's own name servers,
      // and a project owner who tried internal names learnt what each resolves to (cloud private
      // zones, a cluster's service names) from the refusal, the delivery log and a provider's 502.
      const what = literal ? `is ${article} ${kind} address (${address})` : `resolves to ${article} ${kind} address`;
      throw new UnsafeWebhookTarget("blocked_address", `webhook host ${what}${LOCAL_HINT}`);
    }
  }
  return addresses;
}

type NetLookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * An undici Agent's connect-time DNS: only the addresses the latest target check vetted for a
 * host, so a DNS answer that changed since the check cannot redirect the connection.
 */
export function pinnedLookup(vetted: Map<string, ResolvedAddress[]>) {
  return (hostname: string, options: { all?: boolean; family?: number | string }, cb: NetLookupCallback): void => {
    const host = hostname.toLowerCase();
    let addresses = vetted.get(host) ?? [];
    const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : Number(options.family) || 0;
    if (family) addresses = addresses.filter((a) => a.family === family);
    if (addresses.length === 0) {
      const err: NodeJS.ErrnoException = new Error(`no vetted address for ${hostname}`);
      err.code = "ENOTFOUND";
      process.nextTick(cb, err, options.all ? [] : "", 0);
      return;
    }
    if (options.all) process.nextTick(cb, null, addresses.map((a) => ({ address: a.address, family: a.family })));
    else process.nextTick(cb, null, addresses[0].address, addresses[0].family);
  };
}
