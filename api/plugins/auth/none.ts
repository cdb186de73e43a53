/** Model `none`: public routes; every caller is anonymous. */
import type { Authenticator } from './principal';

export const none: Authenticator = async () => ({ model: 'none', id: 'anonymous' });
