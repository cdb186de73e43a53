/**
 * The hub's deploy web server (nginx) as the deploy routes see it: where it answers, and why the actions that need
 * it (deploy, rollback, config) cannot run, which GET /dal/health reports too.
 */
import fs from 'node:fs';
import type { Config } from '../../../core/config.node';

export const INSTALL_HINT = 'apt-get install -y nginx';

export interface DeployWeb {
  /** Where the hub's nginx answers, e.g. http://127.0.0.1:8090. */
  url: string;
  /** Why nginx-needing actions cannot run, or null. Checked per request: installing nginx needs no API restart. */
  unavailable(): string | null;
}

export function deployWeb(config: Pick<Config, 'HOST' | 'DEPLOY_WEB' | 'DEPLOY_WEB_PORT' | 'NGINX_BIN'>): DeployWeb {
  const webHost = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  return {
    url: `http://${webHost}:${config.DEPLOY_WEB_PORT}`,
    unavailable: () => {
      if (config.DEPLOY_WEB === 'off')
        return `DEPLOY_WEB=off: the deploy web server is switched off (set DEPLOY_WEB=on and install nginx: ${INSTALL_HINT})`;
      try {
        fs.accessSync(config.NGINX_BIN, fs.constants.X_OK);
        return null;
      } catch {
        return `nginx is not installed (${config.NGINX_BIN} missing): install it with ${INSTALL_HINT}, then restart`;
      }
    }
  };
}
