/** A view of the console not yet built: it says so. */
import { h, replace } from './dom.js';
import { focusHeading, type ViewContext } from './view.js';

export function showNewUser(view: ViewContext): void {
  const heading = h('h1', {}, 'Not available yet');
  replace(view.main, heading);
  focusHeading(heading, 'Not available yet');
}
