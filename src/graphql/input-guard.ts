// Refuses GraphQL inputs that no field can take (NUL bytes, lone surrogates) before execution.
// Placeholder: filled in by the robustness work.
import type { Plugin } from "graphql-yoga";

export function inputGuardPlugin(): Plugin {
  return {};
}
