// /auth: signup, login, tokens, profile and password recovery.
import { presentOrganizationContext, presentSignedIn, presentTokens } from '../server/presenters/session.js';
import { presentUser } from '../server/presenters/user.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { email, nullableUrl, object, otpCode, password, personName, SignedInView, TokenPairView, UserView, OrganizationView, OrganizationEntryView } from './schemas/common.js';

const otpType = { type: 'string', enum: ['email_verification', 'password_reset'] } as const;
const tag = 'Authentication';

export function authRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'post', path: '/auth/initiate-signup', operationId: 'initiateSignup', tag, auth: { kind: 'public' }, rateLimit: 'initiate-signup',
      summary: 'Start a signup: emails a 6-digit code (type email_verification)',
      description: 'Answers 202 whether or not the email is registered; a registered email receives a sign-in notice instead of a code.',
      body: object({ name: personName, email }, ['name', 'email']),
      response: { status: 202, description: 'Code sent if the email can sign up', data: object({}) },
      handler: async ({ body }) => {
        await s.auth.initiateSignup(body);
        return { message: 'If this email can sign up, a verification code is on its way', data: {} };
      },
    }),
    defineRoute({
      method: 'post', path: '/auth/resend-otp', operationId: 'resendOtp', tag, auth: { kind: 'public' }, rateLimit: 'resend-otp',
      summary: 'Send a new code for an open challenge (the old code stops working)',
      body: object({ email, type: otpType }, ['email', 'type']),
      response: { status: 202, description: 'A new code was sent if a challenge is open', data: object({}) },
      handler: async ({ body }) => {
        await s.auth.resendOtp(body);
        return { message: 'If a code was requested for this email, a new one is on its way', data: {} };
      },
    }),
    defineRoute({
      method: 'post', path: '/auth/verify-otp', operationId: 'verifyOtp', tag, auth: { kind: 'public' }, rateLimit: 'verify-otp',
      summary: 'Check a code: marks a signup email verified, or trades a password-reset code for a reset token',
      description: 'Codes are single use, valid 10 minutes; five wrong codes lock the challenge (400 invalid_otp).',
      body: object({ email, code: otpCode, type: otpType }, ['email', 'code', 'type']),
      response: { status: 200, description: 'Verified', data: object({ verified: { const: true }, resetToken: { type: 'string' } }) },
      handler: async ({ body }) => ({ message: 'Code verified', data: await s.auth.verifyOtp(body) }),
    }),
    defineRoute({
      method: 'post', path: '/auth/complete-signup', operationId: 'completeSignup', tag, auth: { kind: 'public' },
      summary: 'Finish a signup: creates the user, the organization and an accepted owner membership',
      description: 'Needs a verified code, either through verify-otp first or inline as `code`. 409 when the email already has an account.',
      body: object({ email, organizationName: personName, password, domain: { type: 'string', maxLength: 253, pattern: '^[A-Za-z0-9.-]+$' }, code: otpCode }, ['email', 'organizationName', 'password']),
      response: { status: 201, description: 'Signed up and signed in', data: SignedInView },
      errors: [409],
      handler: async ({ body, meta }) => ({ message: 'Welcome aboard', data: presentSignedIn(await s.auth.completeSignup(body, meta)) }),
    }),
    defineRoute({
      method: 'post', path: '/auth/login', operationId: 'login', tag, auth: { kind: 'public' }, rateLimit: 'login',
      summary: 'Sign in with email and password',
      description: '401 for any wrong pair, with the same body and timing whether or not the email is registered.',
      body: object({ email, password: { type: 'string', minLength: 1, maxLength: 128 } }, ['email', 'password']),
      response: { status: 200, description: 'Signed in', data: SignedInView },
      errors: [401],
      handler: async ({ body, meta }) => ({ message: 'Signed in', data: presentSignedIn(await s.auth.login(body, meta)) }),
    }),
    defineRoute({
      method: 'post', path: '/auth/refresh-token', operationId: 'refreshToken', tag, auth: { kind: 'public' },
      summary: 'Trade a refresh token for a new access and refresh token',
      description: 'Each refresh token works once; presenting a used one revokes its whole session (401).',
      body: object({ refreshToken: { type: 'string', minLength: 1, maxLength: 4096 } }, ['refreshToken']),
      response: { status: 200, description: 'New tokens; replace the stored refresh token', data: object(TokenPairView) },
      errors: [401],
      handler: async ({ body }) => ({ message: 'Tokens refreshed', data: presentTokens(await s.auth.refresh(body.refreshToken)) }),
    }),
    defineRoute({
      method: 'post', path: '/auth/logout', operationId: 'logout', tag, auth: { kind: 'bearer' },
      summary: 'End the session (its tokens and sockets stop working at once)',
      body: object({ refreshToken: { type: 'string', maxLength: 4096 } }),
      response: { status: 200, description: 'Signed out' },
      handler: async ({ body, actor }) => {
        await s.auth.logout(actor, body.refreshToken);
        return { message: 'Signed out' };
      },
    }),
    defineRoute({
      method: 'get', path: '/auth/profile', operationId: 'getProfile', tag, auth: { kind: 'bearer' },
      summary: 'The signed-in user, the active organization and role, and every organization they belong to',
      response: {
        status: 200, description: 'Profile',
        data: { type: 'object', properties: { user: UserView, organization: { oneOf: [OrganizationView, { type: 'null' }] }, role: { type: ['string', 'null'] }, organizations: { type: 'array', items: OrganizationEntryView } } },
      },
      handler: async ({ actor }) => {
        const profile = await s.auth.profile(actor);
        return { message: 'Profile', data: presentOrganizationContext(profile.user, profile) };
      },
    }),
    defineRoute({
      method: 'patch', path: '/auth/profile', operationId: 'updateProfile', tag, auth: { kind: 'bearer' },
      summary: 'Change your name or avatar',
      body: { ...object({ name: personName, avatarUrl: nullableUrl }), minProperties: 1 },
      response: { status: 200, description: 'Updated', data: object({ user: UserView }) },
      handler: async ({ body, actor }) => ({ message: 'Profile updated', data: { user: presentUser(await s.auth.updateProfile(actor, body)) } }),
    }),
    defineRoute({
      method: 'post', path: '/auth/change-password', operationId: 'changePassword', tag, auth: { kind: 'bearer' },
      summary: 'Change your password; every other session is signed out',
      body: object({ currentPassword: { type: 'string', minLength: 1, maxLength: 128 }, newPassword: password }, ['currentPassword', 'newPassword']),
      response: { status: 200, description: 'Password changed' },
      handler: async ({ body, actor }) => {
        await s.auth.changePassword(actor, body);
        return { message: 'Password changed' };
      },
    }),
    defineRoute({
      method: 'post', path: '/auth/forgot-password', operationId: 'forgotPassword', tag, auth: { kind: 'public' }, rateLimit: 'forgot-password',
      summary: 'Email a password-reset code and link',
      description: 'Always 200 with the same body, whether or not the email is registered.',
      body: object({ email }, ['email']),
      response: { status: 200, description: 'Password reset email sent' },
      handler: async ({ body }) => {
        await s.auth.forgotPassword(body);
        return { message: 'Password reset email sent' };
      },
    }),
    defineRoute({
      method: 'post', path: '/auth/reset-password-otp', operationId: 'resetPasswordWithCode', tag, auth: { kind: 'public' }, rateLimit: 'reset-password',
      summary: 'Set a new password with the emailed code; signs out every session',
      body: object({ email, code: otpCode, newPassword: password }, ['email', 'code', 'newPassword']),
      response: { status: 200, description: 'Password reset' },
      handler: async ({ body }) => {
        await s.auth.resetPasswordWithOtp(body);
        return { message: 'Password reset; sign in with your new password' };
      },
    }),
    defineRoute({
      method: 'post', path: '/auth/reset-password', operationId: 'resetPasswordWithToken', tag, auth: { kind: 'public' }, rateLimit: 'reset-password',
      summary: 'Set a new password with the token of the emailed link (or of verify-otp); single use, signs out every session',
      body: object({ token: { type: 'string', minLength: 1, maxLength: 512 }, newPassword: password }, ['token', 'newPassword']),
      response: { status: 200, description: 'Password reset' },
      handler: async ({ body }) => {
        await s.auth.resetPasswordWithToken(body);
        return { message: 'Password reset; sign in with your new password' };
      },
    }),
  ];
}
