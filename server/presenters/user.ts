// The only shape in which a user leaves the server: never the password hash.
import type { User } from '../../db/models/User.js';
import { iso } from './time.js';

export interface UserView {
  id: string;
  email: string;
  name: string;
  avatarUrl: string | null;
  emailVerified: boolean;
  createdAt: string;
}

export function presentUser(user: User): UserView {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    avatarUrl: user.avatarUrl ?? null,
    emailVerified: !!user.emailVerifiedAt,
    createdAt: iso(user.createdAt),
  };
}
