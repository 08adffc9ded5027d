// A private certificate authority for tests, made with the openssl command: a root, an
// intermediate it signed, and leaf certificates the intermediate signed, the way a public CA
// issues them. The sender trusts the root the way an operator trusts a private CA in
// production: NODE_EXTRA_CA_CERTS in the process's environment (docs/webhooks.md).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export type KeyPair = { key: string; cert: string };

export type Pki = {
  /** The root's PEM: what NODE_EXTRA_CA_CERTS names. */
  caFile: string;
  intermediate: string;
  /** A leaf for `names` (DNS names and IP addresses), signed by the intermediate. */
  leaf(names: string[], validity?: { from: Date; to: Date }): KeyPair;
  /** A certificate that signed itself, for `names`. */
  selfSigned(names: string[]): KeyPair;
  remove(): void;
};

const stamp = (d: Date) => d.toISOString().replace(/[-:T]/g, "").slice(0, 14) + "Z";
const san = (names: string[]) => names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(",");

export function makePki(): Pki {
  const dir = mkdtempSync(path.join(tmpdir(), "linkgate-pki-"));
  const f = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  const newKey = (name: string) => openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f(name));
  let serial = 1;

  // `openssl ca` is the one openssl command that sets both ends of the validity (an expired leaf).
  writeFileSync(f("index.txt"), "");
  const sign = (csr: string, out: string, issuer: string, ext: string, from: Date, to: Date) => {
    writeFileSync(f("ca.cnf"), `[ca]\ndefault_ca=d\n[d]\ndatabase=${f("index.txt")}\nnew_certs_dir=${dir}\nserial=${f("serial")}\ndefault_md=sha256\npolicy=p\nunique_subject=no\ncopy_extensions=none\n[p]\ncommonName=supplied\n[ext]\n${ext}\n`);
    writeFileSync(f("serial"), (serial++).toString(16).padStart(4, "0") + "\n");
    openssl("ca", "-batch", "-notext", "-config", f("ca.cnf"), "-extensions", "ext", "-cert", f(`${issuer}.pem`), "-keyfile", f(`${issuer}.key`),
      "-startdate", stamp(from), "-enddate", stamp(to), "-in", f(csr), "-out", f(out));
  };
  const day = 86_400_000;
  const now = Date.now();

  newKey("root.key");
  openssl("req", "-x509", "-new", "-key", f("root.key"), "-subj", "/CN=linkgate test root", "-days", "2", "-out", f("root.pem"),
    "-addext", "basicConstraints=critical,CA:true", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
  newKey("intermediate.key");
  openssl("req", "-new", "-key", f("intermediate.key"), "-subj", "/CN=linkgate test intermediate", "-out", f("intermediate.csr"));
  sign("intermediate.csr", "intermediate.pem", "root", "basicConstraints=critical,CA:true,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign", new Date(now - day), new Date(now + day));

  let n = 0;
  return {
    caFile: f("root.pem"),
    intermediate: readFileSync(f("intermediate.pem"), "utf8"),
    leaf(names, validity = { from: new Date(now - day), to: new Date(now + day) }) {
      const id = `leaf${++n}`;
      newKey(`${id}.key`);
      openssl("req", "-new", "-key", f(`${id}.key`), "-subj", `/CN=${names[0]}`, "-out", f(`${id}.csr`));
      sign(`${id}.csr`, `${id}.pem`, "intermediate", `basicConstraints=CA:false\nextendedKeyUsage=serverAuth\nsubjectAltName=${san(names)}`, validity.from, validity.to);
      return { key: readFileSync(f(`${id}.key`), "utf8"), cert: readFileSync(f(`${id}.pem`), "utf8") };
    },
    selfSigned(names) {
      const id = `self${++n}`;
      newKey(`${id}.key`);
      openssl("req", "-x509", "-new", "-key", f(`${id}.key`), "-subj", `/CN=${names[0]}`, "-days", "2", "-out", f(`${id}.pem`),
        "-addext", `subjectAltName=${san(names)}`);
      return { key: readFileSync(f(`${id}.key`), "utf8"), cert: readFileSync(f(`${id}.pem`), "utf8") };
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
