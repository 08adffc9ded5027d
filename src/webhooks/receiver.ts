// The verifier lives in the @linkgate/receiver workspace package (packages/receiver), which
// integrators install on its own; the gateway's tests and examples use that same source.
export * from "../../packages/receiver/src/index.ts";
