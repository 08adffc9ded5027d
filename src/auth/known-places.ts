// Known places (docs/security.md, "Known places"): where an identifier signed in successfully in
// the last 30 days, as a client-address group or a browser holding the hosted pages' device
// cookie. A code start or verify for an identifier from one of its known places is counted in
// its own budget, outside the project-wide and identifier-wide bounds that strangers sending
// to new destinations exhaust, so a flood from elsewhere never shuts the owner out.
//
// Only a hash of (project, identifier, place) is stored, and a device is known only by the
// hash of its random id: the table says nothing about who signed in where to whoever reads it
// without already knowing all three.
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { sha256Hex } from "../crypto.ts";
import type { Tx } from "../db/client.ts";
import type { Identifier } from "./identifiers.ts";
import { addressGroup, KNOWN_FOR_DAYS } from "../rate-limit.ts";

export { KNOWN_FOR_DAYS };
export const DEVICE_COOKIE = "lg_device";
/** The cookie outlives the 30 days a device stays known; every sign-in renews both. */
export const DEVICE_COOKIE_MAX_AGE = 400 * 24 * 3600;

const DEVICE_ID = /^[A-Za-z0-9_-]{43}$/;

type DeviceStore = { id?: string; issued?: string };

/**
 * The device of the request being served. The device rides on the request like its client
 * address, but the actor is built in several places (REST credentials, the GraphQL context,
 * the OpenID Connect interaction), so the HTTP layer puts it here once for the whole request
 * (src/http/client-address.ts deviceCookie) instead of threading it through each of them.
 */
const devices = new AsyncLocalStorage<DeviceStore>();

/** For the HTTP middleware: serve a request with the device its cookie names (ignored unless well-formed). */
export function withDevice(cookie: string | undefined) {
  const store: DeviceStore = { id: cookie && DEVICE_ID.test(cookie) ? cookie : undefined };
  return {
    run: <T>(fn: () => Promise<T>) => devices.run(store, fn),
    /** the device id to set as the cookie: a sign-in recorded this device */
    issued: () => store.issued,
  };
}

/** The current request's device id, if it sent a well-formed one. */
function currentDevice(): string | undefined {
  return devices.getStore()?.id;
}

/** The device for a sign-in to record: the request's own, or a new one the response will set. */
function deviceForSignIn(): string | undefined {
  const store = devices.getStore();
  if (!store) return undefined; // not an HTTP request (a script, a test calling the service)
  store.id ??= randomBytes(32).toString("base64url");
  return (store.issued = store.id);
}

/**
 * A place's id: the hash of (project, identifier, place). src/rate-limit.ts STATE_FAILURES
 * computes the same hash in SQL from an OTP state's identifier; the two must stay alike.
 */
function placeId(projectId: string, identifier: Identifier, place: string): string {
  return sha256Hex(`${projectId}\n${identifier.kind}\n${identifier.value}\n${place}`);
}

// Only an IP address is a place: a client whose address is not one (no socket, or a forwarded
// hop that was no address, src/http/client-address.ts) shares it with every other such client,
// and would be at every such user's known place (thirteenth review).
const places = (clientAddress: string, device: string | undefined) => [
  ...(isIP(clientAddress) ? [`a:${addressGroup(clientAddress)}`] : []),
  ...(device ? [`d:${sha256Hex(device)}`] : []),
];

/** Where this request comes from: its client-address group and, if it sent one, its device. */
export function placesHere(clientAddress: string): string[] {
  return places(clientAddress, currentDevice());
}

/** The ids of `here` (placesHere) for one identifier, as known_sign_ins stores them. */
export function placeIds(projectId: string, identifier: Identifier, here: string[]): string[] {
  return here.map((p) => placeId(projectId, identifier, p));
}

/**
 * The places of a sign-in decided in one statement (src/auth/sign-in.sql), which learns the
 * identifier only from the state it judges: `judge` are the request's own places (placesHere),
 * `record` what a success records (a new device when the request has none), hashed there as
 * placeIds hashes them. `recorded()` after a success hands the device to the response's cookie,
 * as deviceForSignIn does; after a failure no cookie is set.
 */
export function signInPlaces(clientAddress: string): { judge: string[]; record: string[]; recorded: () => void } {
  const store = devices.getStore();
  const device = store ? (store.id ?? randomBytes(32).toString("base64url")) : undefined;
  return {
    judge: placesHere(clientAddress),
    record: places(clientAddress, device),
    recorded: () => {
      if (!store) return;
      store.id ??= device;
      store.issued = store.id;
    },
  };
}

/** Records (or renews) this request's places as known for `identifier`, in the sign-in's transaction. */
export async function recordKnownPlaces(tx: Tx, projectId: string, identifier: Identifier, clientAddress: string): Promise<void> {
  const ids = placeIds(projectId, identifier, places(clientAddress, deviceForSignIn()));
  await tx.$executeRaw`
    INSERT INTO known_sign_ins (id, project_id, last_at)
    SELECT id, ${projectId}, now() AT TIME ZONE 'UTC' FROM unnest(${ids}::text[]) AS t(id)
    ON CONFLICT (id) DO UPDATE SET last_at = EXCLUDED.last_at`;
}
