// How unexpected errors leave GraphQL: masked, except faults the client should know about.
// Placeholder: filled in by the robustness work.
import { maskError as yogaMaskError } from "graphql-yoga";

export const maskError = yogaMaskError;
