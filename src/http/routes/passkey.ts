// Passkeys over REST (CONTRACT section 4a): the same service as the GraphQL fields, with the
// WebAuthn options and responses as plain JSON.
import { Hono } from "hono";
import { projectActor, userActor } from "../credentials.ts";
import {
  finishPasskeyRegistration,
  finishPasskeySignIn,
  listPasskeys,
  passkeyJson,
  removePasskey,
  renamePasskey,
  startPasskeyRegistration,
  startPasskeySignIn,
} from "../../auth/passkeys.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";

const user = userActor;
const project = projectActor;

export function passkeyRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/auth/passkey/registration/options", async (c) => {
    const actor = await user(c);
    await jsonBody(c, []);
    return c.json(await startPasskeyRegistration(c.get("deps"), actor));
  });

  r.post("/auth/passkey/registration/verify", async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, ["response", "name"]);
    const passkey = await finishPasskeyRegistration(c.get("deps"), actor, { response: body.response, name: body.name });
    return c.json({ passkey: passkeyJson(passkey) });
  });

  r.post("/auth/passkey/sign-in/options", async (c) => {
    const actor = await project(c);
    await jsonBody(c, []);
    return c.json(await startPasskeySignIn(c.get("deps"), actor));
  });

  r.post("/auth/passkey/sign-in/verify", async (c) => {
    const actor = await project(c);
    const body = await jsonBody(c, ["response"]);
    return c.json(await finishPasskeySignIn(c.get("deps"), actor, { response: body.response }));
  });

  r.get("/auth/passkey/list", async (c) => {
    const actor = await user(c);
    return c.json({ passkeys: (await listPasskeys(c.get("deps"), actor)).map(passkeyJson) });
  });

  r.post("/auth/passkey/rename", async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, ["id", "name"]);
    const renamed = await renamePasskey(c.get("deps"), actor, { id: str(body, "id") ?? "", name: body.name });
    return c.json({ passkey: passkeyJson(renamed) });
  });

  r.post("/auth/passkey/remove", async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, ["id"]);
    return c.json({ removed_id: (await removePasskey(c.get("deps"), actor, { id: str(body, "id") ?? "" })).removedId });
  });
  return r;
}
