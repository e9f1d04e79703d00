// The text of every mail the platform sends. Codes are the only 6-digit number in a mail; links carry `?token=`.
import type { MailMessage } from './index.js';

export function signupCodeMail(to: string, name: string, code: string): MailMessage {
  return {
    kind: 'signup_code',
    to,
    subject: 'Your verification code',
    text: `Hello ${name},\n\nYour verification code is ${code}.\nIt is valid for 10 minutes. If you did not ask for it, ignore this mail.\n`,
  };
}

/** Sent instead of a code when someone starts a signup with an email that already has an account. */
export function accountExistsMail(to: string, loginUrl: string): MailMessage {
  return {
    kind: 'account_exists',
    to,
    subject: 'You already have an account',
    text: `Someone tried to sign up with this email address, which already has an account.\nSign in at ${loginUrl} or reset your password there. If it was not you, ignore this mail.\n`,
  };
}

export function passwordResetMail(to: string, code: string, link: string): MailMessage {
  return {
    kind: 'password_reset',
    to,
    subject: 'Reset your password',
    text: `Your password reset code is ${code}. It is valid for 10 minutes.\n\nOr open this link within an hour to choose a new password:\n${link}\n\nIf you did not ask for this, ignore this mail; your password stays as it is.\n`,
  };
}

export function invitationMail(to: string, organizationName: string, inviterName: string, link: string): MailMessage {
  return {
    kind: 'invitation',
    to,
    subject: `You are invited to join ${organizationName}`,
    text: `${inviterName} invited you to join ${organizationName}.\n\nAccept the invitation within 7 days:\n${link}\n`,
  };
}
