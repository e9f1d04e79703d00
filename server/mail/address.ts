// Mail addresses as configuration writes them (MAIL_FROM): shared by ticket mail and sender identities.

export interface MailAddress {
  name: string;
  address: string;
}

/** `Name <address>` or a bare address, as MAIL_FROM is written. */
export function parseMailbox(value: string): MailAddress {
  const m = /^\s*"?([^"<]*?)"?\s*<([^<>\s]+)>\s*$/.exec(value);
  if (m) return { name: m[1]!.trim(), address: m[2]! };
  return { name: '', address: value.trim() };
}
