// The authentication preHandler. `Authorization: Bearer <token>` where token is a session token (from
// login) or an access token (from GET /api/user/token). An `sk-` API key is refused with a message
// saying so. A banned account is refused even with a live token.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { UserRow } from '../accounts/account-view.js';
import { ACCOUNT_STATUS, ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import { ConsoleError } from '../http/errors.js';
import { resolveSession, revokedByBan } from './sessions.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by requireUser: the authenticated account as read at the start of this request. */
    account: UserRow | null;
  }
}

export type PreHandler = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  // The scheme may be left out, as new-api allows (scripts written for it send the token alone);
  // another scheme (`Basic …`) has a space in it and is no token.
  const m = /^(?:Bearer[ \t]+)?(\S+)\s*$/i.exec(header);
  return m ? m[1] : undefined;
}

export function makeRequireUser(ctx: ConsoleContext) {
  return function requireUser(minRole: number = ROLE.user): PreHandler {
    return async (request) => {
      const token = bearerToken(request.headers.authorization);
      if (!token) throw new ConsoleError('UNAUTHENTICATED');
      if (token.startsWith('sk-')) throw new ConsoleError('API_KEY_NOT_ACCEPTED');
      const user = await resolveSession(ctx.sql, token, ctx.now());
      if (!user) throw new ConsoleError(await revokedByBan(ctx.sql, token) ? 'ACCOUNT_BANNED' : 'INVALID_ACCESS_TOKEN');
      if (user.status !== ACCOUNT_STATUS.enabled) throw new ConsoleError('ACCOUNT_BANNED');
      if (user.role < minRole) throw new ConsoleError('INSUFFICIENT_ROLE');
      request.account = user;
    };
  };
}

export type RequireUser = ReturnType<typeof makeRequireUser>;

/** The account set by requireUser; a route without the preHandler calling this is a programming error. */
export function currentUser(request: FastifyRequest): UserRow {
  if (!request.account) throw new Error('currentUser() on a route without requireUser');
  return request.account;
}
