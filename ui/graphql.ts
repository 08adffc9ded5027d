// The dashboard and the hosted pages reach the server the same way, one POST to /graphql, and
// must say the same thing when it does not answer or answers without GraphQL. What each sends
// (a secret key; a publishable key and a user's token) and what a refusal means to it (ask for
// the key again; sign in again) differ, so each gets the first error back to interpret.
import { at } from "./base.ts";

export type GraphQLError = { message: string; extensions?: { code?: string; error?: string } };

/** An answer in GraphQL's shape: `error` is the first of its errors. */
export type GraphQLAnswer<T> = { status: number; data?: T; error?: GraphQLError };

/** `headers` add to the JSON ones; `unreachable` is what to say when no answer comes. */
export async function postGraphQL<T>(
  headers: Record<string, string>,
  query: string,
  variables: Record<string, unknown>,
  unreachable: string,
): Promise<GraphQLAnswer<T>> {
  let res: Response;
  try {
    res = await fetch(at("/graphql"), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", ...headers },
      body: JSON.stringify({ query, variables }),
    });
  } catch {
    throw new Error(unreachable);
  }
  let body: { data?: T; errors?: GraphQLError[] };
  try {
    body = await res.json();
  } catch {
    throw new Error(`The server answered ${res.status} without a GraphQL response.`);
  }
  return { status: res.status, data: body.data, error: body.errors?.[0] };
}

/** The data of an answer whose error has been dealt with. */
export function dataOf<T>(answer: GraphQLAnswer<T>): T {
  if (!answer.data) throw new Error(`The server answered ${answer.status} without data.`);
  return answer.data;
}
