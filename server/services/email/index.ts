// The email area: the organization's sender identity (and, with the AI routes, templated mail and OTP checks).
export { EmailIdentityService, senderOf, VERIFICATION_HOST, type DnsRecord, type EmailIdentityInput, type EmailIdentityView, type MailSender, type TxtResolver } from './identity.js';
export { EMAIL_TEMPLATES, EmailSendService, type EmailTemplate, type TemplatedMail } from './send.js';
