import { Hono } from "hono";
import { userActor } from "../credentials.ts";
import { removeLink, requestLink, unmerge, verifyLink } from "../../linking/service.ts";
import type { AppEnv } from "../env.ts";
import { jsonBody, str } from "../body.ts";

const user = userActor;

export function linkRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/users/link/request", async (c) => {
    const actor = await user(c);
    const { stateId } = await requestLink(c.get("deps"), actor, await jsonBody(c, ["email", "phone"]));
    return c.json({ state_id: stateId });
  });

  r.post("/users/link/verify", async (c) => {
    const actor = await user(c);
    const body = await jsonBody(c, ["state_id", "otp"]);
    return c.json(await verifyLink(c.get("deps"), actor, { stateId: str(body, "state_id"), otp: str(body, "otp") }));
  });

  r.post("/users/link/remove", async (c) => {
    const actor = await user(c);
    return c.json(await removeLink(c.get("deps"), actor, await jsonBody(c, ["email", "phone"])));
  });

  r.post("/users/link/unmerge", async (c) => {
    const actor = await user(c);
    await jsonBody(c, []);
    return c.json(await unmerge(c.get("deps"), actor));
  });
  return r;
}
