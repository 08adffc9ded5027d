import { describe, expect, it, vi } from "vitest";
import { assertSafeTarget, UnsafeWebhookTarget, type ResolvedAddress } from "../src/webhooks/target-guard.ts";

const PUBLIC_V4 = "93.184.215.14";
const PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c";

/** An injected resolver so no test depends on real DNS. */
function fakeDns(table: Record<string, string[]>) {
  return vi.fn(async (host: string): Promise<ResolvedAddress[]> => {
    const addrs = table[host];
    if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return addrs.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  });
}

async function refusal(url: string, lookup = fakeDns({})): Promise<UnsafeWebhookTarget> {
  const err = await assertSafeTarget(url, { allowPrivate: false, lookup }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, `${url} should be refused`).toBeInstanceOf(UnsafeWebhookTarget);
  expect((err as UnsafeWebhookTarget).code).toBe("InvalidWebhookUrl");
  return err as UnsafeWebhookTarget;
}

describe("assertSafeTarget refuses internal addresses", () => {
  const refused: [url: string, kind: string][] = [
    ["https://127.0.0.1/hook", "loopback"],
    ["https://127.255.0.9/", "loopback"],
    ["https://2130706433/", "loopback"], // decimal
    ["https://0x7f.0.0.1/", "loopback"], // hex
    ["https://0177.0.0.1/", "loopback"], // octal
    ["https://127.1/", "loopback"], // short form
    ["https://10.0.0.5/", "private"],
    ["https://172.16.0.1/", "private"],
    ["https://172.31.255.254/", "private"],
    ["https://192.168.1.1/", "private"],
    ["https://169.254.169.254/latest/meta-data/", "link-local"],
    ["https://100.64.0.1/", "carrier-grade NAT"],
    ["https://100.127.255.254/", "carrier-grade NAT"],
    ["https://224.0.0.1/", "multicast"],
    ["https://0.0.0.0/", "unspecified"],
    ["https://0.1.2.3/", "unspecified"],
    ["https://255.255.255.255/", "broadcast"],
    ["https://240.0.0.1/", "reserved"],
    ["https://192.88.99.1/", "reserved"], // deprecated 6to4 relay anycast (RFC 7526)
    ["https://[::1]/", "loopback"],
    ["https://[::]/", "unspecified"],
    ["https://[::ffff:127.0.0.1]/", "loopback"],
    ["https://[::ffff:7f00:1]/", "loopback"],
    ["https://[::ffff:10.1.2.3]/", "private"],
    ["https://[::ffff:169.254.169.254]/", "link-local"],
    ["https://[64:ff9b::10.0.0.1]/", "private"],
    ["https://[64:ff9b::7f00:1]/", "loopback"],
    ["https://[2002:7f00:1::]/", "loopback"], // 6to4 wrapping 127.0.0.1
    ["https://[fc00::1]/", "unique local"],
    ["https://[fd12:3456::1]/", "unique local"],
    ["https://[fe80::1]/", "link-local"],
    ["https://[ff02::1]/", "multicast"],
    ["https://[::7f00:1]/", "reserved"], // deprecated IPv4-compatible
    ["https://[3fff::1]/", "reserved"], // documentation, the newer range (RFC 9637)
    ["https://[5f00::1]/", "reserved"], // SRv6 segment identifiers
    ["https://[100:0:0:1::1]/", "reserved"], // the dummy prefix
    ["https://[::ffff:0:7f00:1]/", "loopback"], // IPv4-translated (SIIT) 127.0.0.1
    ["https://[::ffff:0:10.0.0.1]/", "private"],
    ["https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"], // tunnels to a hidden IPv4 address
    ["https://[2001:0:7f00:1::]/", "Teredo"],
  ];

  it.each(refused)("%s (%s)", async (url, kind) => {
    const lookup = fakeDns({});
    const err = await refusal(url, lookup);
    expect(err.reason).toBe("blocked_address");
    expect(err.message).toContain(`${kind} address`);
    expect(lookup).not.toHaveBeenCalled(); // IP literals are never resolved
  });

  it("sees through numeric IPv4 forms because the URL parser normalises them", async () => {
    expect((await refusal("http://2130706433/")).reason).toBe("scheme");
    const allowed = await assertSafeTarget("http://2130706433/", { allowPrivate: true, lookup: fakeDns({}) });
    expect(allowed).toEqual([{ address: "127.0.0.1", family: 4 }]);
  });

  it("names the offending address in the message", async () => {
    expect((await refusal("https://10.0.0.5/")).message).toBe(
      "webhook host is a private address (10.0.0.5); for local development, LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 allows private and loopback targets",
    );
  });

  it("refuses a hostname when any resolved address is private", async () => {
    const lookup = fakeDns({ "mixed.example.com": [PUBLIC_V4, "10.0.0.5"] });
    const err = await refusal("https://mixed.example.com/hook", lookup);
    // what an internal name resolves to is not said: the operator's name servers answered it
    expect(err.message).toBe("webhook host resolves to a private address; for local development, LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 allows private and loopback targets");
    expect(lookup).toHaveBeenCalledWith("mixed.example.com");
  });

  it("refuses names resolving to metadata, mapped or NAT64 addresses", async () => {
    const lookup = fakeDns({
      "meta.example.com": ["169.254.169.254"],
      "mapped.example.com": [PUBLIC_V6, "::ffff:192.168.0.1"],
      "nat64.example.com": ["64:ff9b::a9fe:a9fe"],
    });
    expect((await refusal("https://meta.example.com/", lookup)).message).toContain("link-local");
    expect((await refusal("https://mapped.example.com/", lookup)).message).toContain("private");
    expect((await refusal("https://nat64.example.com/", lookup)).message).toContain("link-local");
  });

  it("refuses port 0, which no attempt could reach, with or without private targets allowed", async () => {
    expect(await refusal("https://1.1.1.1:0/")).toMatchObject({ reason: "invalid_url", message: "webhook URL must not name port 0" });
    await expect(assertSafeTarget("http://127.0.0.1:0/", { allowPrivate: true, lookup: fakeDns({}) })).rejects.toMatchObject({ reason: "invalid_url" });
  });

  it("refuses internal hostnames without resolving them", async () => {
    for (const url of ["https://metadata.google.internal/computeMetadata/v1/", "https://METADATA.google.internal./", "https://localhost/", "https://a.localhost/"]) {
      const lookup = fakeDns({});
      expect((await refusal(url, lookup)).reason).toBe("blocked_hostname");
      expect(lookup).not.toHaveBeenCalled();
    }
  });

  it("requires https", async () => {
    const err = await refusal("http://hooks.example.com/", fakeDns({ "hooks.example.com": [PUBLIC_V4] }));
    // a developer trying a local receiver learns which variable allows it
    expect([err.reason, err.message]).toEqual(["scheme", "webhook URL must use https:// (for local development, LINKGATE_WEBHOOK_ALLOW_PRIVATE=1 allows http:// and private addresses)"]);
    expect((await refusal("ftp://hooks.example.com/")).reason).toBe("scheme");
    expect((await refusal("file:///etc/passwd")).reason).toBe("scheme");
  });

  it("refuses credentials in the URL", async () => {
    for (const url of ["https://user:pw@hooks.example.com/", "https://user@hooks.example.com/", "https://:pw@hooks.example.com/"]) {
      expect((await refusal(url)).reason).toBe("credentials");
    }
  });

  it("refuses invalid and unresolvable URLs", async () => {
    expect((await refusal("not a url")).reason).toBe("invalid_url");
    expect((await refusal("/relative/path")).reason).toBe("invalid_url");
    expect((await refusal("https://[fe80::1%25eth0]/")).reason).toBe("invalid_url");
    const err = await refusal("https://nowhere.invalid/", fakeDns({}));
    expect([err.reason, err.message]).toEqual(["unresolvable", "webhook host nowhere.invalid could not be resolved (ENOTFOUND)"]);
    expect((await refusal("https://empty.example.com/", fakeDns({ "empty.example.com": [] }))).reason).toBe("unresolvable");
  });
});

describe("assertSafeTarget accepts public targets", () => {
  const lookup = fakeDns({ "hooks.example.com": [PUBLIC_V4, PUBLIC_V6] });

  it("returns the vetted addresses of a public hostname", async () => {
    await expect(assertSafeTarget("https://hooks.example.com:8443/in?x=1", { allowPrivate: false, lookup })).resolves.toEqual([
      { address: PUBLIC_V4, family: 4 },
      { address: PUBLIC_V6, family: 6 },
    ]);
  });

  it.each([
    ["https://8.8.8.8/", "8.8.8.8"],
    ["https://172.32.0.1/", "172.32.0.1"],
    ["https://100.128.0.1/", "100.128.0.1"],
    ["https://[2606:4700:4700::1111]/", "2606:4700:4700::1111"],
    ["https://[::ffff:8.8.8.8]/", "::ffff:808:808"],
    ["https://[64:ff9b::8.8.8.8]/", "64:ff9b::808:808"],
  ])("%s", async (url, address) => {
    const none = fakeDns({});
    const [only] = await assertSafeTarget(url, { allowPrivate: false, lookup: none });
    expect(only.address).toBe(address);
    expect(none).not.toHaveBeenCalled();
  });
});

describe("allowPrivate", () => {
  const opts = { allowPrivate: true, lookup: fakeDns({ localhost: ["127.0.0.1", "::1"], "svc.internal": ["10.0.0.7"] }) };

  it("lets loopback, private names and http through", async () => {
    await expect(assertSafeTarget("http://127.0.0.1:3000/hook", opts)).resolves.toEqual([{ address: "127.0.0.1", family: 4 }]);
    await expect(assertSafeTarget("http://localhost:3000/", opts)).resolves.toHaveLength(2);
    await expect(assertSafeTarget("https://svc.internal/", opts)).resolves.toEqual([{ address: "10.0.0.7", family: 4 }]);
    await expect(assertSafeTarget("http://[::1]/", opts)).resolves.toEqual([{ address: "::1", family: 6 }]);
  });

  it("still refuses other schemes and credentials", async () => {
    await expect(assertSafeTarget("ftp://127.0.0.1/", opts)).rejects.toMatchObject({ reason: "scheme" });
    await expect(assertSafeTarget("http://a:b@127.0.0.1/", opts)).rejects.toMatchObject({ reason: "credentials" });
  });
});
