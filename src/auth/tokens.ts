// Token signing: an ES256 key kept in the database with its private half sealed under the
// master key, published at /.well-known/jwks.json. Access and ID tokens always describe the
// primary account and carry the session id (`sid`) that every authenticated call checks.
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT, type JWK } from "jose";
import { LRUCache } from "lru-cache";
import type { Db, Tx } from "../db/client.ts";
import { takeFirstRunTurn } from "../db/locks.ts";
import { transaction } from "../db/transaction.ts";
import { seal, unseal, type MasterKey } from "../crypto.ts";
import { Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import type { Claims, KeyStore, VerifiedAccessToken } from "../deps.ts";

const ALG = "ES256";
export const ACCESS_TOKEN_TTL_SECONDS = 3600;
/** how far another clock may be ahead of ours */
const CLOCK_SKEW_SECONDS = 60;

export type { Claims, KeyStore };

export async function openKeyStore(db: Db, master: MasterKey, issuer: string): Promise<KeyStore> {
  const activeKeys = () => db.signingKey.findMany({ where: { retiredAt: null }, orderBy: { createdAt: "desc" } });
  let rows = await activeKeys();
  if (rows.length === 0) {
    // in the first-run turn: of gateways starting at once, one creates the key, the others find it
    await transaction(db, async (tx) => {
      await takeFirstRunTurn(tx);
      if ((await tx.signingKey.count({ where: { retiredAt: null } })) === 0) await createSigningKey(tx, master);
    });
    rows = await activeKeys();
  }
  const current = rows[0];
  const privateKey = await importJWK(JSON.parse(unseal(master, current.privateSealed)) as JWK, ALG);
  const publicJwks = { keys: rows.map((r) => ({ ...(r.publicJwk as JWK), kid: r.id, alg: r.alg, use: "sig" })) };
  const keySet = createLocalJWKSet(publicJwks);
  const verified = verifiedTokens();

  return {
    issuer,
    jwks: () => publicJwks,
    sign(claims, { subject, audience, ttlSeconds }) {
      return new SignJWT(claims)
        .setProtectedHeader({ alg: ALG, kid: current.id, typ: "JWT" })
        .setIssuer(issuer)
        .setSubject(subject)
        .setAudience(audience)
        .setIssuedAt()
        .setExpirationTime(`${ttlSeconds}s`)
        .sign(privateKey);
    },
    async verifyAccessToken(token) {
      const known = verified.get(token);
      if (known && Date.now() < known.expiresAtMs) return copyOf(known.token);
      let payload, protectedHeader;
      try {
        // jose checks exp only when present and never looks at a future iat: a token without
        // an expiry, or minted "in the future" by someone holding a key, must not pass.
        ({ payload, protectedHeader } = await jwtVerify(token, keySet, { issuer, algorithms: [ALG], requiredClaims: ["exp", "iat"] }));
      } catch {
        throw new Unauthenticated(REFUSED);
      }
      const result = accessTokenClaims(protectedHeader.typ, payload);
      verified.set(token, { token: result, expiresAtMs: payload.exp! * 1000 });
      return copyOf(result);
    },
  };
}

const REFUSED = "the access token is missing, malformed, expired or forged";

/** What a verified token grants; throws Unauthenticated for a signed token that is no access token. */
function accessTokenClaims(typ: string | undefined, payload: Record<string, unknown>): VerifiedAccessToken {
  const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
  const issuedInFuture = (payload.iat as number) > Math.floor(Date.now() / 1000) + CLOCK_SKEW_SECONDS;
  if (issuedInFuture || !isAccessToken(typ, payload) || typeof payload.sub !== "string" || !payload.sub || typeof aud !== "string" || !aud || typeof payload.sid !== "string") {
    throw new Unauthenticated(REFUSED);
  }
  if (typeof payload.client_id !== "string") return { sub: payload.sub, aud, sid: payload.sid };
  const scopes = typeof payload.scope === "string" ? payload.scope.split(" ").filter(Boolean) : [];
  return { sub: payload.sub, aud, sid: payload.sid, clientId: payload.client_id, scopes };
}

/**
 * Access tokens this process has verified, each until its expiry (docs/security.md, "Verified
 * tokens"). A client sends the same token with every call of its hour, and checking an ES256
 * signature costs about 90 µs of CPU, a tenth of a link flow's Node time. Only the signature's
 * verdict is kept: the API key, the session and the app are still read on every call
 * (authenticate.ts), so a sign-out or a revoked key takes effect as before. The signing keys are
 * read once when the process starts, so a kept token is one this process would verify again;
 * refusals are never kept. Keyed by the whole token, bounded in entries and in bytes.
 */
function verifiedTokens() {
  return new LRUCache<string, { token: VerifiedAccessToken; expiresAtMs: number }>({
    max: 10_000,
    maxSize: 16 * 1024 * 1024,
    sizeCalculation: (_value, token) => token.length + 256,
  });
}

/** Callers get their own copy: an actor's scopes must not change another caller's. */
function copyOf(token: VerifiedAccessToken): VerifiedAccessToken {
  return token.scopes ? { ...token, scopes: [...token.scopes] } : { ...token };
}

/**
 * Our own sign-in tokens say `token_use: access` under `typ: JWT`; the OpenID Connect provider's
 * are RFC 9068 (`typ: at+jwt` with `client_id`). An ID token is neither, so it never passes.
 */
function isAccessToken(typ: string | undefined, payload: Record<string, unknown>): boolean {
  if (typ === "JWT") return payload.token_use === "access";
  return typ?.toLowerCase() === "at+jwt" && typeof payload.client_id === "string";
}

/** The live signing keys with their private halves, newest first, for the OpenID Connect provider. */
export async function signingJwks(db: Db, master: MasterKey): Promise<JWK[]> {
  const rows = await db.signingKey.findMany({ where: { retiredAt: null }, orderBy: { createdAt: "desc" } });
  return rows.map((r) => ({ ...(JSON.parse(unseal(master, r.privateSealed)) as JWK), kid: r.id, alg: r.alg, use: "sig" }));
}

async function createSigningKey(db: Db | Tx, master: MasterKey): Promise<void> {
  const { publicKey, privateKey } = await generateKeyPair(ALG, { extractable: true });
  await db.signingKey.create({
    data: {
      id: newId("kid"),
      alg: ALG,
      publicJwk: (await exportJWK(publicKey)) as object,
      privateSealed: seal(master, JSON.stringify(await exportJWK(privateKey))),
    },
  });
}
