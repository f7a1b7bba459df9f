// The smallest router that does the job: the path is the state; links and navigate() push history.
import { useEffect, useState } from 'preact/hooks';

const subscribers = new Set<(path: string) => void>();

export function navigate(path: string): void {
  if (path === location.pathname + location.search) return;
  history.pushState(null, '', path);
  for (const fn of subscribers) fn(location.pathname);
}

addEventListener('popstate', () => {
  for (const fn of subscribers) fn(location.pathname);
});

export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    subscribers.add(setPath);
    return () => void subscribers.delete(setPath);
  }, []);
  return path;
}

/** A click on a link navigates in place (a modified click still opens a new tab). */
export function linkClick(e: MouseEvent): void {
  const a = e.currentTarget as HTMLAnchorElement;
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href') ?? '/');
}
