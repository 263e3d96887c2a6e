/** What every view of the console is given: where to draw, who is signed in, the feed, and a way to clean up. */
import type { Feed } from './feed.js';
import type { Session } from './session.js';

export interface ViewContext {
  readonly main: HTMLElement;
  readonly session: Session;
  readonly feed: Feed;
  /** The paths the server declares as indexes (`GET /indexes`); none where the server has no such endpoint. */
  readonly declared: Promise<readonly string[]>;
  /** Runs `cleanup` when the view is left (another view, sign-out). */
  onLeave(cleanup: () => void): void;
  /** Whether the view is still the one shown: an answer that comes later is dropped. */
  active(): boolean;
}

/** Whether the signed-in account may change things. */
export function canWrite(session: Session): boolean {
  return session.role === 'admin';
}

/** Why a control is disabled for a reader: its tooltip and description. */
export const READ_ONLY = 'Your account may read only (role reader).';

/** Moves the focus to the view's heading and names the tab after it, for screen reader and keyboard users. */
export function focusHeading(heading: HTMLElement, title: string): void {
  document.title = `${title} · users-server`;
  heading.setAttribute('tabindex', '-1');
  heading.focus({ preventScroll: true });
}
