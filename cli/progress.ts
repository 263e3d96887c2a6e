/**
 * The one-line progress display of long commands (`import`, `export`) on
 * stderr, when it is a terminal: a bar when the end is known, the count,
 * the rate and the time left, redrawn every PROGRESS_INTERVAL_MS and
 * erased at the end. Nothing is drawn when stderr is not a terminal, with
 * -q, or with -v (whose exchange lines it would overwrite).
 */
import type { Context } from './context.js';

const PROGRESS_INTERVAL_MS = 100;
const BAR_WIDTH = 24;

/** Where a command stands: how many `unit` are done, how many failed, and the fraction of the whole when known. */
interface Standing {
  done: number;
  failed?: number;
  fraction?: number;
}

interface Progress {
  stop(): void;
}

/** Draws `standing()` until `stop`; undefined when there is nobody to show it to. */
export function startProgress(
  ctx: Context,
  unit: string,
  standing: () => Standing,
  started = Date.now(),
): Progress | undefined {
  if (ctx.io.stderr.isTTY !== true || ctx.options.quiet || ctx.options.verbose) return undefined;
  const draw = () =>
    ctx.io.stderr.write(`\r\x1b[2K${progressLine(ctx, unit, standing(), (Date.now() - started) / 1000)}`);
  const timer = setInterval(draw, PROGRESS_INTERVAL_MS);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      ctx.io.stderr.write('\r\x1b[2K');
    },
  };
}

/** `[#####---]  42% 4200 users, 1234/s, 0:03 left`: the bar and the time left only when the fraction is known. */
export function progressLine(
  ctx: Pick<Context, 'paint'>,
  unit: string,
  { done, failed = 0, fraction }: Standing,
  seconds: number,
): string {
  const rate = seconds > 0 ? Math.round(done / seconds) : 0;
  let bar = '';
  let left = '';
  if (fraction !== undefined) {
    const part = Math.min(1, Math.max(0, fraction));
    const filled = Math.round(part * BAR_WIDTH);
    bar = `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(part * 100)).padStart(3)}% `;
    if (part > 0 && seconds > 0) left = `, ${clock((seconds * (1 - part)) / part)} left`;
  }
  const failures = failed === 0 ? '' : `, ${ctx.paint(`${failed} failed`, '31')}`;
  return `${bar}${done} ${unit}${failures}, ${rate}/s${left}`;
}

/** Seconds as m:ss (h:mm:ss past an hour). */
function clock(seconds: number): string {
  const s = Math.ceil(seconds);
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, '0')}:${rest}` : `${minutes}:${rest}`;
}
