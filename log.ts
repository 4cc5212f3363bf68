import pino, { type Logger } from 'pino';

/** Structured JSON logs on stdout; LOG_LEVEL picks the level (default info). */
export function createLogger(level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { service: 'onejob' } });
}
