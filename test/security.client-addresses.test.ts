// What the abuse limits count by (twelfth review): a forwarded hop with a port, in brackets, or
// in an odd IPv4 spelling was taken as it came, each a budget of its own (a fresh one for every
// source port behind a proxy that writes `ip:port`); and an IPv6 address carrying an IPv4 one
// was counted by its /64, so behind a NAT64 or SIIT translator every IPv4 client was one.
import { describe, expect, it } from "vitest";
import { placesHere } from "../src/auth/known-places.ts";
import { NO_SOCKET, normalize, UNPARSED } from "../src/http/client-address.ts";
import { addressGroup } from "../src/rate-limit.ts";

describe("a forwarded hop as a client address", () => {
  it.each([
    ["203.0.113.5", "203.0.113.5"],
    ["203.0.113.5:4000", "203.0.113.5"],
    ["203.0.113.5:4007", "203.0.113.5"],
    ["[2001:db8::1]:443", "2001:db8::1"],
    ["[2001:db8::1]", "2001:db8::1"],
    ["[203.0.113.7]", "203.0.113.7"],
    ["203.0.113.5:99999", "203.0.113.5"],
    ["2001:db8::1", "2001:db8::1"],
    ["::ffff:203.0.113.5", "203.0.113.5"],
    ["::FFFF:203.0.113.5", "203.0.113.5"],
    ["::ffff:0:203.0.113.5", "::ffff:0:203.0.113.5"], // SIIT: an address, grouped as its IPv4 one below
    // a zone names the interface of the machine that saw the address: any word after the % was taken
    ["fe80::1%eth0", "fe80::1"],
    ["fe80::1%call-1-900-555-0100-to-cancel", "fe80::1"],
    ["[fe80::1%call-1-900-555-0100]:443", "fe80::1"],
  ])("%s is %s", (hop, address) => {
    expect(normalize(hop)).toBe(address);
  });

  it.each(["0xcb.0.113.7", "0313.0.113.7", "203.0.113.007", "3405803783", "[0313.0.113.7]:80", "example.com", "203.0.113.5:port", ""])(
    "%j is no address: every such hop is one client",
    (hop) => {
      expect(normalize(hop)).toBe(UNPARSED);
    },
  );
});

describe("the group an address is counted in", () => {
  it.each([
    ["::ffff:203.0.113.7", "203.0.113.7"],
    ["::ffff:cb00:7107", "203.0.113.7"],
    ["::ffff:0:203.0.113.7", "203.0.113.7"],
    ["64:ff9b::203.0.113.7", "203.0.113.7"],
    ["64:ff9b::cb00:7107", "203.0.113.7"],
    ["::203.0.113.7", "203.0.113.7"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["::1", "0:0:0:0::/64"],
    ["203.0.113.7", "203.0.113.7"],
  ])("%s counts as %s", (address, group) => {
    expect(addressGroup(address)).toBe(group);
  });

  it("two IPv4 clients behind one NAT64 prefix are two clients", () => {
    expect(addressGroup("64:ff9b::198.51.100.1")).not.toBe(addressGroup("64:ff9b::198.51.100.2"));
  });
});

describe("a known place", () => {
  it("is an IP address's group: a client with no address shares none with the others (thirteenth review)", () => {
    expect(placesHere("203.0.113.5")).toEqual(["a:203.0.113.5"]);
    expect(placesHere("64:ff9b::203.0.113.5")).toEqual(["a:203.0.113.5"]);
    expect(placesHere(UNPARSED)).toEqual([]);
    expect(placesHere(NO_SOCKET)).toEqual([]);
  });
});
