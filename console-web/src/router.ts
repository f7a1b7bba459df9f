// The smallest router that does the job: the address is the state; links and navigate() push history.
// Components read the part they depend on (usePath, useSearch) and are drawn again when it changes.
import { useEffect, useState } from 'preact/hooks';

const subscribers = new Set<() => void>();

function changed(): void {
  for (const fn of subscribers) fn();
}

/**
 * Goes to `path` (with its query string). `replace` rewrites the current history entry instead of
 * adding one: for an address corrected in place, which Back should not return to.
 */
export function navigate(path: string, opts: { replace?: boolean } = {}): void {
  if (path === location.pathname + location.search) return;
  if (opts.replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  changed();
}

addEventListener('popstate', changed);

function useLocationPart(read: () => string): string {
  const [value, setValue] = useState(read);
  useEffect(() => {
    const fn = () => setValue(read());
    subscribers.add(fn);
    // The address may have changed between the first drawing and this subscription.
    fn();
    return () => void subscribers.delete(fn);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return value;
}

export function usePath(): string {
  return useLocationPart(() => location.pathname);
}

/** The query string ("?p=2", or "" without one), read again on navigate() and on Back / Forward. */
export function useSearch(): string {
  return useLocationPart(() => location.search);
}

/** A click on a link navigates in place (a modified click still opens a new tab). */
export function linkClick(e: MouseEvent): void {
  const a = e.currentTarget as HTMLAnchorElement;
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href') ?? '/');
}
