/**
 * The administrator token: ADMIN_TOKEN from the environment, or one generated at first start and kept at
 * DATA_DIR/admin-token with mode 0600. Only its digest stays in memory.
 */
import fs from 'node:fs';
import path from 'node:path';
import { hashSecret, newSecret } from '../core/credentials.node';

export function adminTokenPath(dataDir: string): string {
  return path.join(dataDir, 'admin-token');
}

export function loadAdminTokenHash(
  dataDir: string,
  fromEnv: string | undefined,
  announce: (msg: string) => void
): string {
  if (fromEnv) return hashSecret(fromEnv);
  const file = adminTokenPath(dataDir);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true });
    try {
      fs.writeFileSync(file, newSecret('adm_') + '\n', { mode: 0o600, flag: 'wx' });
      announce(
        `Generated an administrator token at ${file} (mode 0600). Use it as "Authorization: Bearer <token>" on /admin.`
      );
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return hashSecret(fs.readFileSync(file, 'utf8').trim());
}
