// The part of oidc-provider's API the sign-on test uses to run a local OpenID provider (the package
// ships no types).
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';
  interface ProviderAccount {
    accountId: string;
    claims(): Promise<Record<string, unknown>>;
  }
  interface ProviderConfiguration {
    clients?: Record<string, unknown>[];
    pkce?: { required?: () => boolean };
    claims?: Record<string, string[]>;
    cookies?: { keys?: string[] };
    features?: Record<string, unknown>;
    findAccount?(ctx: unknown, sub: string): Promise<ProviderAccount | undefined> | ProviderAccount | undefined;
  }
  export default class Provider {
    constructor(issuer: string, configuration?: ProviderConfiguration);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
