// Imports every part of the schema, in dependency order, and builds it.
import { builder } from "../builder.ts";
import "./root.ts";
import "./errors.ts";
import "./sign-in.ts";
import "./viewer.ts";
import "./passkey.ts";
import "./session.ts";
import "./linking.ts";
import "./identity-provider.ts";
import "./webhook.ts";
import "./oauth-client.ts";
import "./delivery.ts";
import "./admin.ts";
import "./dashboard.ts";

export const schema = builder.toSchema({ sortSchema: true });
