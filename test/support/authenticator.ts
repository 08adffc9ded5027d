// A software WebAuthn authenticator for server-side tests: real P-256 keys, real CBOR
// attestation objects ("none" attestation) and real ECDSA assertions, built to the WebAuthn
// spec so @simplewebauthn/server verifies them exactly as it verifies a browser's. The browser
// tests use Chromium's CDP virtual authenticator instead.
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from "node:crypto";
import { isoBase64URL, isoCBOR } from "@simplewebauthn/server/helpers";

type Credential = { id: Uint8Array; privateKey: KeyObject; cose: Uint8Array; userHandle: string; counter: number; rpId: string };

const b64 = (bytes: Uint8Array) => isoBase64URL.fromBuffer(new Uint8Array(bytes));
const sha256 = (data: Uint8Array | string) => new Uint8Array(createHash("sha256").update(data).digest());

function u32(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n);
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts.map((p) => Buffer.from(p))));
}

function coseKey(publicKey: KeyObject): Uint8Array {
  const jwk = publicKey.export({ format: "jwk" });
  const map = new Map<number, number | Uint8Array>([
    [1, 2], // kty: EC2
    [3, -7], // alg: ES256
    [-1, 1], // crv: P-256
    [-2, isoBase64URL.toBuffer(jwk.x!)],
    [-3, isoBase64URL.toBuffer(jwk.y!)],
  ]);
  return isoCBOR.encode(map);
}

const FLAGS = { UP: 0x01, UV: 0x04, AT: 0x40 };

/**
 * userVerified: false makes an assertion without the UV flag (a security key without a PIN, a skipped prompt).
 * credentialIdBytes: the length of the credential id a registration creates (16 unless told).
 */
export type Overrides = { origin?: string; rpId?: string; challenge?: string; type?: string; counter?: number; userVerified?: boolean; credentialIdBytes?: number };

export class SoftAuthenticator {
  readonly credentials: Credential[] = [];
  constructor(readonly origin: string) {}

  /** navigator.credentials.create() for server-made creation options */
  create(options: any, o: Overrides = {}) {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const rpId = o.rpId ?? options.rp.id;
    const cred: Credential = { id: new Uint8Array(randomBytes(o.credentialIdBytes ?? 16)), privateKey, cose: coseKey(publicKey), userHandle: options.user.id, counter: 0, rpId };
    const attested = concat(new Uint8Array(16), new Uint8Array([cred.id.length >> 8, cred.id.length & 0xff]), cred.id, cred.cose);
    const authData = concat(sha256(rpId), new Uint8Array([FLAGS.UP | FLAGS.UV | FLAGS.AT]), u32(0), attested);
    const attestationObject = isoCBOR.encode(new Map<string, unknown>([["fmt", "none"], ["attStmt", new Map()], ["authData", authData]]) as never);
    const clientData = this.clientData(o.type ?? "webauthn.create", o.challenge ?? options.challenge, o.origin);
    this.credentials.push(cred);
    return {
      id: b64(cred.id),
      rawId: b64(cred.id),
      type: "public-key",
      response: { clientDataJSON: b64(clientData), attestationObject: b64(attestationObject), transports: ["internal"] },
      clientExtensionResults: {},
      authenticatorAttachment: "platform",
    };
  }

  /** navigator.credentials.get() with a discoverable credential: no identifier typed */
  get(options: any, credential = this.credentials[this.credentials.length - 1], o: Overrides = {}) {
    credential.counter = o.counter ?? credential.counter + 1;
    const authData = concat(sha256(o.rpId ?? credential.rpId), new Uint8Array([FLAGS.UP | (o.userVerified === false ? 0 : FLAGS.UV)]), u32(credential.counter));
    const clientData = this.clientData(o.type ?? "webauthn.get", o.challenge ?? options.challenge, o.origin);
    const signature = sign("sha256", concat(authData, sha256(clientData)), credential.privateKey);
    return {
      id: b64(credential.id),
      rawId: b64(credential.id),
      type: "public-key",
      response: { clientDataJSON: b64(clientData), authenticatorData: b64(authData), signature: b64(new Uint8Array(signature)), userHandle: credential.userHandle },
      clientExtensionResults: {},
      authenticatorAttachment: "platform",
    };
  }

  private clientData(type: string, challenge: string, origin = this.origin): Uint8Array {
    return new TextEncoder().encode(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }
}
