// The shell: who is signed in (GET /api/user/self through the session cookie), the navigation, and
// the page of the current path. Administrator pages are listed only for role >= 10 and each one
// also refuses to render below it; the API refuses the calls anyway.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, call, maybeSignedIn, onSignedOut, pinSession, sessionSwitched, type SignOutReason } from './api/client';
import type { Account } from './api/types';
import { ErrorText, Loading, errorText } from './components/ui';
import { ROLE, ROLE_NAMES } from './format';
import { linkClick, navigate, usePath } from './router';
import { AuthPage } from './pages/auth';
import { DashboardPage } from './pages/dashboard';
import { KeysPage } from './pages/keys';
import { LogsPage } from './pages/logs';
import { PricingPage } from './pages/pricing';
import { TopupPage } from './pages/topup';
import { ProfilePage } from './pages/profile';
import { AdminUsersPage } from './pages/admin/users';
import { AdminChannelsPage } from './pages/admin/channels';
import { AdminRedemptionsPage } from './pages/admin/redemptions';
import { AdminOptionsPage } from './pages/admin/options';
import { AdminTopupsPage } from './pages/admin/topups';
import { AdminLogsPage } from './pages/admin/logs';

export interface PageProps {
  account: Account;
  /** Reads the account again (balance after a redemption, a new display name). */
  refreshAccount: () => void;
}

const USER_PAGES = [
  { path: '/', title: 'Dashboard', page: DashboardPage },
  { path: '/keys', title: 'API keys', page: KeysPage },
  { path: '/logs', title: 'Usage logs', page: LogsPage },
  { path: '/pricing', title: 'Pricing', page: PricingPage },
  { path: '/topup', title: 'Top up', page: TopupPage },
  { path: '/profile', title: 'Profile', page: ProfilePage },
];
const ADMIN_PAGES = [
  { path: '/admin/users', title: 'Accounts', page: AdminUsersPage },
  { path: '/admin/channels', title: 'Channels', page: AdminChannelsPage },
  { path: '/admin/redemptions', title: 'Redemption codes', page: AdminRedemptionsPage },
  { path: '/admin/options', title: 'Options', page: AdminOptionsPage },
  { path: '/admin/topups', title: 'Top-up orders', page: AdminTopupsPage },
  { path: '/admin/logs', title: 'All usage logs', page: AdminLogsPage },
];

/** new-api's console paths (/console/topup, which payment providers return to) are this console's. */
export function pagePath(raw: string): string {
  return raw.startsWith('/console/') ? raw.slice('/console'.length) : raw === '/console' ? '/' : raw;
}

/** The signed-out pages: signed in, they go to the dashboard. */
const AUTH_PATHS: ReadonlySet<string> = new Set(['/login', '/register', '/reset']);

/** What the login page says when the session ended under an open page. */
const SIGNED_OUT_NOTICE: Record<SignOutReason, string> = {
  ended: 'Your session expired; log in again.',
  banned: 'You were signed out: this account is banned. Ask an administrator if you think this is a mistake.',
  switched: 'Another account was signed in in another tab; log in again.',
};

/** What a tab says once it noticed the browser's session became another account's (api/client.ts sessionSwitched). */
const SWITCHED_NOTICE = 'This tab was signed in as another account in another tab: it now shows that account, and nothing was sent as the one it showed.';

export function App() {
  const path = pagePath(usePath());
  const [account, setAccount] = useState<Account | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | null>(null);

  // The account a tab showed when another tab signed the browser in again: the notice is for another account only.
  const [switchedFrom, setSwitchedFrom] = useState<number | null>(null);
  const shownId = useRef<number | null>(null);
  const refreshAccount = () => {
    // The session read is the one the page shows from now on: a call under another is not sent.
    const session = maybeSignedIn() ? undefined : null;
    call(api.GET('/api/user/self')).then(
      (a) => { if (session === undefined) pinSession(); setAccount(a); setLoadError(null); },
      (err: unknown) => {
        if ((err as { status?: number }).status === 401) { pinSession(undefined); setAccount(null); }
        else setLoadError(errorText(err));
      },
    );
  };
  // Signed out, the first question would only be refused: the login page is shown without asking.
  useEffect(() => { if (maybeSignedIn()) refreshAccount(); else setAccount(null); }, []);
  // After a page change, the keyboard and screen reader start at the new page's heading.
  useEffect(() => {
    const h1 = document.querySelector<HTMLElement>('main h1');
    if (h1 && (document.activeElement === document.body || document.activeElement?.closest('nav'))) h1.focus();
  }, [path, account === null]);
  // The window's title names the page shown, from its first drawing too (a page loaded signed in,
  // such as a payment provider's return to /console/topup, is drawn only once the account is read).
  const shown = account === undefined ? 'loading' : account === null ? 'signed out' : 'signed in';
  useEffect(() => {
    const h1 = document.querySelector<HTMLElement>('main h1');
    if (h1) document.title = `${h1.textContent} · Gateway console`;
  }, [path, shown]);
  // A 401 while signed in: the session ended under the page (expired, revoked). The login page says
  // so; the path stays, so logging in again returns to the page that was open.
  const [signedOut, setSignedOut] = useState<SignOutReason | null>(null);
  const signedIn = useRef(false);
  signedIn.current = !!account;
  shownId.current = account ? account.id : null;
  const loggingOut = useRef(false);
  // Another tab signed the browser in again: this one shows the account now signed in, read again.
  const readSwitchedSession = () => {
    pinSession(undefined);
    setSwitchedFrom(shownId.current);
    refreshAccount();
  };
  useEffect(() => onSignedOut((reason) => {
    if (reason === 'switched') {
      readSwitchedSession();
      return;
    }
    if (signedIn.current && !loggingOut.current) setSignedOut(reason);
    pinSession(undefined);
    setAccount(null);
  }), []);
  // Looked at again, a tab checks the session is still the one it shows, before any click.
  useEffect(() => {
    const check = () => {
      if (sessionSwitched()) readSwitchedSession();
    };
    window.addEventListener('focus', check);
    document.addEventListener('visibilitychange', check);
    return () => { window.removeEventListener('focus', check); document.removeEventListener('visibilitychange', check); };
  }, []);
  const [logoutError, setLogoutError] = useState<string | null>(null);
  // Signed in on the login or register address: the dashboard.
  useEffect(() => {
    if (account && AUTH_PATHS.has(path)) navigate('/');
  }, [account, path]);

  if (account === undefined) return loadError ? <main class="auth"><ErrorText error={loadError} /></main> : <main class="auth"><Loading /></main>;
  if (account === null) {
    return <AuthPage mode={path === '/register' ? 'register' : path === '/reset' ? 'reset' : 'login'} notice={signedOut ? SIGNED_OUT_NOTICE[signedOut] : undefined}
      onLoggedIn={() => { setSignedOut(null); refreshAccount(); if (AUTH_PATHS.has(path)) navigate('/'); }} />;
  }

  const isAdmin = account.role >= ROLE.admin;
  const all = [...USER_PAGES, ...ADMIN_PAGES];
  const current = all.find((p) => p.path === path);
  const adminOnly = ADMIN_PAGES.some((p) => p.path === path);
  const Page = current?.page;

  const logout = async () => {
    loggingOut.current = true;
    setLogoutError(null);
    try {
      await call(api.POST('/api/user/logout'));
    } catch (err) {
      // 401 or 403: the session is over already (revoked, banned, another's). Anything else (the
      // console unreachable, a 5xx) left it alive: the page stays signed in and says so, rather than
      // show a login page over a session a reload would find signed in (review web).
      const status = (err as { status?: number }).status;
      if (status !== 401 && status !== 403) {
        loggingOut.current = false;
        setLogoutError(`Could not log out: ${errorText(err)}. You are still signed in; try again.`);
        return;
      }
    }
    loggingOut.current = false;
    pinSession(undefined);
    setSwitchedFrom(null);
    setSignedOut(null);
    setAccount(null);
    navigate('/');
  };

  return (
    <div class="shell">
      <a class="skip" href="#main">Skip to the page</a>
      <header class="top">
        <span class="brand">Gateway console</span>
        <span class="who">{account.display_name || account.username} · {ROLE_NAMES[account.role] ?? `role ${account.role}`}</span>
        <button type="button" class="logout" onClick={() => void logout()}>Log out</button>
        {logoutError && <p class="error" role="alert">{logoutError}</p>}
      </header>
      <nav class="side" aria-label="Main">
        <ul>
          {USER_PAGES.map((p) => <li key={p.path}><a href={p.path} aria-current={p.path === path ? 'page' : undefined} onClick={linkClick}>{p.title}</a></li>)}
        </ul>
        {isAdmin && (
          <>
            <h2 class="nav-head">Administration</h2>
            <ul>
              {ADMIN_PAGES.map((p) => <li key={p.path}><a href={p.path} aria-current={p.path === path ? 'page' : undefined} onClick={linkClick}>{p.title}</a></li>)}
            </ul>
          </>
        )}
      </nav>
      <main class="content" id="main">
        {switchedFrom !== null && account.id !== switchedFrom && <p class="notice" role="status">{SWITCHED_NOTICE}</p>}
        {!Page ? <><h1>Not found</h1><p>No page at {path}.</p></>
          : adminOnly && !isAdmin ? <><h1 tabIndex={-1}>{current!.title}</h1><p class="error" role="alert">This page is for administrators.</p></>
          : <><h1 tabIndex={-1}>{current!.title}</h1><Page account={account} refreshAccount={refreshAccount} /></>}
      </main>
    </div>
  );
}
