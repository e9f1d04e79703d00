// IANA time zones: organizations count their days in one (settings.timezone), analytics may be asked for another.

/** True for a zone this runtime's Intl knows (e.g. "Europe/Paris", "UTC"); false for anything else. */
export function isTimeZone(zone: string): boolean {
  if (!zone || zone.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}
