/**
 * Building the page: elements made with their attributes and children, text
 * always as text nodes. Nothing here (or anywhere in the console) turns a
 * string into markup: user data cannot become an element or a script, and
 * the page's Content-Security-Policy (Trusted Types) would refuse it anyway.
 */

type Child = Node | string | number | false | null | undefined;
type Handler = (event: Event) => void;

interface Props {
  /** Attributes, set with setAttribute; `true` sets an empty one, false and undefined none. */
  readonly [name: string]: string | number | boolean | undefined | Handler | Record<string, Handler>;
}

/**
 * An element of `tag` with `props` (attributes; `on` holds event listeners
 * by event name) and `children` appended in order.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === 'on') {
      for (const [event, listener] of Object.entries(value as Record<string, Handler>))
        element.addEventListener(event, listener);
    } else if (value === true) element.setAttribute(name, '');
    else if (value !== false && value !== undefined) element.setAttribute(name, String(value));
  }
  append(element, ...children);
  return element;
}

/** Appends children, strings as text. */
function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === false || child === null || child === undefined) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** Replaces every child of `parent` with `children`. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild !== null) parent.removeChild(parent.firstChild);
  append(parent, ...children);
}

/** The element with this id, which the page is known to hold. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`no element #${id}`);
  return element as T;
}

let announcer: HTMLElement | undefined;

/** Says `text` to a screen reader (a polite live region) and shows it for a moment. */
export function announce(text: string): void {
  announcer ??= document.body.appendChild(h('div', { class: 'toast', role: 'status', 'aria-live': 'polite' }));
  const region = announcer;
  region.textContent = text;
  region.classList.add('shown');
  clearTimeout(Number(region.dataset.timer));
  region.dataset.timer = String(setTimeout(() => region.classList.remove('shown'), 4000));
}
