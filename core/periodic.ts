import type { Logger } from 'pino';

export interface Periodic {
  /** Stops the ticks and waits for a pass still running. */
  stop(): Promise<void>;
}

/**
 * Runs `pass` every `intervalMs` (and once at once when `immediately`). A tick that comes while the
 * last pass is still running is skipped rather than piled up; a failed pass is logged and the next
 * tick tries again. The timer does not keep the process alive.
 */
export function runPeriodically(
  what: string,
  intervalMs: number,
  pass: () => Promise<unknown>,
  log: Logger,
  options: { immediately?: boolean } = {},
): Periodic {
  let running: Promise<void> | undefined;
  const tick = () => {
    if (running) return;
    running = pass()
      .then(() => {}, (err) => log.error({ err }, `${what} failed; retrying on the next tick`))
      .finally(() => (running = undefined));
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  if (options.immediately) tick();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
