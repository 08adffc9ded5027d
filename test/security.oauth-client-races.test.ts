// An OpenID Connect client's secret rotated while another request changes the client
// (docs/oidc.md, "Clients"). rotateOAuthClientSecret read the client, then wrote it with
// Prisma's update: a deletion committed in between made that update throw, and the caller got
// INTERNAL_SERVER_ERROR ("Unexpected error.", logged as a fault) instead of NotFound; and of two
// rotations at the same moment both answered a secret, the first of which had been replaced
// before anyone saw it: its caller deployed a secret that was invalid_client from the start.
// The write is now conditional on the secret read, as a webhook's rotation is: a deleted client
// is NotFound, the loser of two rotations InvalidRequest (rotate again), and the winner's secret
// is the one that works. deleteOAuthClient, which read the client unlocked too, answered the
// second of two deletions with the same fault; it now locks the row as it reads it.
// Postgres only: a second connection changes the client and holds its row until the request's
// write comes to wait for it, then commits; on PGlite one connection serves everything in turn.
import { describe, expect, it } from "vitest";
import { secretMatches } from "../src/oidc/clients.ts";
import { serverUrl } from "./support/db.ts";
import { harnessFor } from "./support/hooks.ts";
import { committedUnder, lockHolder } from "./support/locks.ts";

const onPostgres = serverUrl ? describe : describe.skip;

const ROTATE = `mutation($id: ID!) { rotateOAuthClientSecret(id: $id) { __typename ... on Error { message } ... on OAuthClientWithSecret { clientSecret } } }`;

onPostgres("an OAuth client changed while its secret is rotated", () => {
  const h = harnessFor("postgres");
  const blocker = lockHolder(h);

  async function newClient(): Promise<string> {
    const created = await h.gql(
      `mutation { createOAuthClient(input: {name: "Acme", redirectUris: ["https://app.example/cb"], type: CONFIDENTIAL}) { __typename ... on OAuthClientWithSecret { client { id } } } }`,
    );
    const id = created.body.data?.createOAuthClient?.client?.id;
    if (!id) throw new Error(JSON.stringify(created.body));
    return id;
  }

  it("a client deleted meanwhile is NotFound, not a fault", async () => {
    const id = await newClient();
    const rotated = await committedUnder(blocker, "DELETE FROM oauth_clients WHERE id = $1", [id], () => h.gql(ROTATE, { id }));
    expect(rotated.body.errors).toBeUndefined();
    expect(rotated.body.data.rotateOAuthClientSecret).toEqual({ __typename: "NotFound", message: expect.any(String) });
    expect(await h.db.prisma.oAuthClient.count({ where: { id } })).toBe(0);
  });

  it("of two rotations at the same moment, the second to write is told to rotate again, and the first one's secret stays the one that works", async () => {
    const id = await newClient();
    // the blocker is the other rotation: its secret is "lgcs_other"
    const otherHash = (await import("../src/crypto.ts")).sha256Hex("lgcs_other");
    const rotated = await committedUnder(blocker, `UPDATE oauth_clients SET secret_hash = '${otherHash}' WHERE id = $1`, [id], () => h.gql(ROTATE, { id }));
    expect(rotated.body.errors).toBeUndefined();
    expect(rotated.body.data.rotateOAuthClientSecret).toEqual({ __typename: "InvalidRequest", message: expect.stringMatching(/rotate/) });
    const stored = await h.db.prisma.oAuthClient.findUniqueOrThrow({ where: { id } });
    expect(secretMatches(stored.secretHash, "lgcs_other")).toBe(true);
  });

  it("of two deletions at the same moment, the second is NotFound, not a fault", async () => {
    const id = await newClient();
    const deleted = await committedUnder(blocker, "DELETE FROM oauth_clients WHERE id = $1", [id], () =>
      h.gql(`mutation($id: ID!) { deleteOAuthClient(id: $id) { __typename ... on Error { message } } }`, { id }),
    );
    expect(deleted.body.errors).toBeUndefined();
    expect(deleted.body.data.deleteOAuthClient).toEqual({ __typename: "NotFound", message: expect.any(String) });
  });

  it("a rotation alone answers a secret that is the client's from then on", async () => {
    const id = await newClient();
    const rotated = await h.gql(ROTATE, { id });
    const secret = rotated.body.data.rotateOAuthClientSecret.clientSecret as string;
    const stored = await h.db.prisma.oAuthClient.findUniqueOrThrow({ where: { id } });
    expect(secretMatches(stored.secretHash, secret)).toBe(true);
  });
});
