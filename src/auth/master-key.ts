// The master key: LINKGATE_SECRET_KEY, or in development one generated once and kept in the
// data folder (production refuses to start without the variable, see config.ts).
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ConfigError } from "../config.ts";
import { parseMasterKey, seal, unseal, type MasterKey } from "../crypto.ts";
import { writingDataFolder } from "../data-folder.ts";
import type { Db } from "../db/client.ts";

export function resolveMasterKey(config: { secretKey?: string; dataDir: string }): MasterKey {
  if (config.secretKey) return parseMasterKey(config.secretKey);
  const file = path.resolve(config.dataDir, "dev-secret.key");
  if (!existsSync(file)) {
    writingDataFolder(config.dataDir, "or LINKGATE_SECRET_KEY (without it, a development master key is kept there)", () => {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" });
    });
  }
  return parseMasterKey(readFileSync(file, "utf8").trim());
}

/**
 * Stops a gateway or a worker whose master key is not the one the database was set up with, in
 * one line (docs/configuration.md), before it does anything with it. Without this check a
 * gateway died on the signing key with a stack trace, and a worker ran: it recorded every
 * delivery as failed to unseal its webhook's secret, using up their attempts until the webhooks
 * were disabled (25th review). What is checked is something sealed under the key: the newest
 * signing key or a webhook's secret when there are (sealed before the check row existed), and
 * the check row, which the first process to start on the database seals. Without it a worker
 * started with another key on a database no gateway had set up yet passed (26th review).
 */
export async function checkMasterKey(db: Db, master: MasterKey, config: { secretKey?: string; dataDir: string }): Promise<void> {
  const older =
    (await db.signingKey.findFirst({ where: { retiredAt: null }, orderBy: { createdAt: "desc" }, select: { privateSealed: true } }))?.privateSealed ??
    (await db.webhook.findFirst({ select: { secretSealed: true } }))?.secretSealed;
  if (older && !opens(master, older)) throw wrongKey(config);
  await db.masterKeyCheck.createMany({ data: [{ id: 1, sealed: seal(master, CHECK_TEXT) }], skipDuplicates: true });
  const { sealed } = await db.masterKeyCheck.findUniqueOrThrow({ where: { id: 1 } });
  if (!opens(master, sealed)) throw wrongKey(config);
}

const CHECK_TEXT = "linkgate master key check";

function opens(master: MasterKey, sealed: string): boolean {
  try {
    unseal(master, sealed);
    return true;
  } catch {
    return false;
  }
}

function wrongKey(config: { secretKey?: string; dataDir: string }): ConfigError {
  const which = config.secretKey ? "LINKGATE_SECRET_KEY" : `the development key in ${path.resolve(config.dataDir, "dev-secret.key")} (LINKGATE_SECRET_KEY is unset)`;
  return new ConfigError(`${which} is not the master key this database was set up with: what it sealed cannot be opened. Start with the key its first gateway or worker used`);
}
