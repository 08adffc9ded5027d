// Token signing: an ES256 key kept in the database with its private half sealed under the
// master key, published at /.well-known/jwks.json. Access and ID tokens always describe the
// primary account and carry the session id (`sid`) that every authenticated call checks.
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT, type JWK } from "jose";
import type { Db } from "../db/client.ts";
import { seal, unseal, type MasterKey } from "../crypto.ts";
import { Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import type { Claims, KeyStore } from "../deps.ts";

const ALG = "ES256";
export const ACCESS_TOKEN_TTL_SECONDS = 3600;
/** how far another clock may be ahead of ours */
const CLOCK_SKEW_SECONDS = 60;

export type { Claims, KeyStore };

export async function openKeyStore(db: Db, master: MasterKey, issuer: string): Promise<KeyStore> {
  let rows = await db.signingKey.findMany({ where: { retiredAt: null }, orderBy: { createdAt: "desc" } });
  if (rows.length === 0) {
    await createSigningKey(db, master);
    rows = await db.signingKey.findMany({ where: { retiredAt: null }, orderBy: { createdAt: "desc" } });
  }
  const current = rows[0];
  const privateKey = await importJWK(JSON.parse(unseal(master, current.privateSealed)) as JWK, ALG);
  const publicJwks = { keys: rows.map((r) => ({ ...(r.publicJwk as JWK), kid: r.id, alg: r.alg, use: "sig" })) };
  const keySet = createLocalJWKSet(publicJwks);

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
      try {
        // jose checks exp only when present and never looks at a future iat: a token without
        // an expiry, or minted "in the future" by someone holding a key, must not pass.
        const { payload, protectedHeader } = await jwtVerify(token, keySet, { issuer, algorithms: [ALG], requiredClaims: ["exp", "iat"] });
        if (payload.iat! > Math.floor(Date.now() / 1000) + CLOCK_SKEW_SECONDS) throw new Error("issued in the future");
        const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
        if (!isAccessToken(protectedHeader.typ, payload) || !payload.sub || !aud || typeof payload.sid !== "string") throw new Error("not an access token");
        if (typeof payload.client_id !== "string") return { sub: payload.sub, aud, sid: payload.sid };
        const scopes = typeof payload.scope === "string" ? payload.scope.split(" ").filter(Boolean) : [];
        return { sub: payload.sub, aud, sid: payload.sid, clientId: payload.client_id, scopes };
      } catch {
        throw new Unauthenticated("the access token is missing, malformed, expired or forged");
      }
    },
  };
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

async function createSigningKey(db: Db, master: MasterKey): Promise<void> {
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
