/**
 * The logging surface the library layers need (SSH dials, libvirt calls, image fetches): a subset
 * of pino's `Logger`, so a pino logger (or a child of one) can be passed as is, and so can any
 * object with these two methods (an activity's log, a metering wrapper). One line per event: the
 * fields first, then the message. Lines never carry key material, passphrases or agent details.
 */
export interface LineLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}
