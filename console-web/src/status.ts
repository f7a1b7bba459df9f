// GET /api/status: the public settings the pages adapt to before and after login (whether
// registration is open, needs an e-mail code, mail is configured, OpenID Connect sign-on is on).
import { api, call } from './api/client';
import type { paths } from './api/schema.gen';
import { useLoad } from './components/ui';

export type ServiceStatus = NonNullable<paths['/api/status']['get']['responses'][200]['content']['application/json']['data']>;

/**
 * The status, read once per page shown: undefined while it loads; null when it could not be read (the
 * pages then offer what the API may refuse, as they did before the status was asked).
 */
export function useServiceStatus(): ServiceStatus | null | undefined {
  const load = useLoad(() => call(api.GET('/api/status')), []);
  return load.loading && load.data === undefined ? undefined : load.error !== null ? null : load.data ?? null;
}

/** Whether registration with a password is open: unknown (status unread) counts as open, the API decides. */
export function passwordRegistrationOpen(s: ServiceStatus | null | undefined): boolean {
  return !s || (s.register_enabled !== false && s.password_register_enabled !== false);
}
