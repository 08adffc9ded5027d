// The master key: LINKGATE_SECRET_KEY, or in development one generated once and kept in the
// data folder (production refuses to start without the variable, see config.ts).
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseMasterKey, type MasterKey } from "../crypto.ts";

export function resolveMasterKey(config: { secretKey?: string; dataDir: string }): MasterKey {
  if (config.secretKey) return parseMasterKey(config.secretKey);
  const file = path.resolve(config.dataDir, "dev-secret.key");
  if (!existsSync(file)) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" });
  }
  return parseMasterKey(readFileSync(file, "utf8").trim());
}
