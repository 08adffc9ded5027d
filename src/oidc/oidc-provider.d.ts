// oidc-provider ships no types (and @types/oidc-provider is not a dependency): the part of its
// API linkgate uses, as documented in its docs/README.md.
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  export type AdapterPayload = Record<string, any> & {
    jti?: string;
    grantId?: string;
    uid?: string;
    accountId?: string;
    consumed?: number;
  };
  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }
  export type ClientMetadata = Record<string, unknown>;
  export type Client = {
    clientId: string;
    clientName?: string;
    clientSecret?: string;
    metadata(): Record<string, unknown>;
  };
  export type KoaContextWithOIDC = any;
  export type Configuration = Record<string, any>;
  export type InteractionDetails = {
    uid: string;
    params: Record<string, unknown>;
    prompt: { name: string; reasons: string[]; details: Record<string, unknown> };
    result?: Record<string, unknown>;
    session?: { accountId: string };
    persist(): Promise<unknown>;
  };
  export class Grant {
    constructor(props: { accountId: string; clientId: string });
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  export default class Provider {
    constructor(issuer: string, configuration: Configuration);
    proxy: boolean;
    issuer: string;
    Client: { find(id: string): Promise<Client | undefined>; prototype: any };
    Grant: typeof Grant;
    Interaction: { find(uid: string): Promise<(InteractionDetails & { result?: any }) | undefined> };
    use(middleware: (ctx: any, next: () => Promise<unknown>) => Promise<unknown> | unknown): void;
    on(event: string, listener: (...args: any[]) => void): this;
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionResult(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<string>;
  }
  export const errors: { InvalidTarget: new (description?: string) => Error } & Record<string, new (description?: string) => Error>;
  export class InteractionCheck {
    static REQUEST_PROMPT: true;
    static NO_NEED_TO_PROMPT: false;
    constructor(reason: string, description: string, error: string, check: (ctx: KoaContextWithOIDC) => boolean | Promise<boolean>);
  }
  export type InteractionPrompt = { name: string; checks: InteractionCheck[] & { add(check: InteractionCheck, index?: number): void } };
  export const interactionPolicy: {
    Check: typeof InteractionCheck;
    base(): InteractionPrompt[] & { get(name: string): InteractionPrompt };
  };
}
