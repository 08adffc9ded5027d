import type { Deps } from "../deps.ts";
import type { Logger } from "../log.ts";

export type AppEnv = { Variables: { deps: Deps; log: Logger; requestId: string; clientAddress: string } };
