/** Asking before something that cannot be undone: a modal dialog, keyboard and screen-reader friendly (<dialog>). */
import { h } from './dom.js';

/**
 * Shows a modal dialog with `question` and two buttons; resolves true when
 * the person confirms, false on Cancel or Escape. The focus goes to Cancel
 * first, and back where it was after.
 */
export function confirmAction(title: string, question: string, confirmLabel: string): Promise<boolean> {
  const cancel = h('button', { type: 'button' }, 'Cancel');
  const confirm = h('button', { type: 'button', class: 'danger' }, confirmLabel);
  const heading = h('h2', { id: 'confirm-title' }, title);
  const dialog = h(
    'dialog',
    { 'aria-labelledby': 'confirm-title', 'aria-describedby': 'confirm-question' },
    heading,
    h('p', { id: 'confirm-question' }, question),
    h('div', { class: 'actions' }, confirm, cancel),
  );
  document.body.appendChild(dialog);
  return new Promise((resolve) => {
    const close = (answer: boolean) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    cancel.addEventListener('click', () => close(false));
    confirm.addEventListener('click', () => close(true));
    dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      close(false);
    });
    dialog.showModal();
    cancel.focus();
  });
}
