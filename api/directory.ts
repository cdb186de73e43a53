/**
 * The endpoint directory, filled from route declarations (route `config.directory`) as each listener registers
 * its routes, so /a2a/endpoints and /a2a/endpoints/summary can never drift from what is really served.
 */
import { AuthModel, EndpointGroup } from '../core/endpoint-groups';

export type ListenerName = 'main' | 'backup' | 'hub' | 'commercial' | 'memory' | 'daemon';

export interface DirectoryDeclaration {
  group: EndpointGroup;
  summary: string;
  /** Overrides the group's public_read for this endpoint. */
  publicRead?: boolean;
}

export interface DirectoryEntry {
  method: string;
  path: string;
  group: EndpointGroup;
  auth: AuthModel;
  /** Further models the endpoint also accepts (route `config.authAlso`): any one of auth and these will do. */
  auth_also: AuthModel[];
  public_read: boolean;
  summary: string;
  listener: ListenerName;
}

export class EndpointDirectory {
  private readonly byKey = new Map<string, DirectoryEntry>();

  add(entry: DirectoryEntry): void {
    // One endpoint can be served by two listeners (the truth write on main and backup): list it once, on main.
    const key = `${entry.method} ${entry.path}`;
    const existing = this.byKey.get(key);
    if (!existing || (existing.listener !== 'main' && entry.listener === 'main')) this.byKey.set(key, entry);
  }

  entries(): DirectoryEntry[] {
    return [...this.byKey.values()].sort(
      (a, b) => a.group.localeCompare(b.group) || a.path.localeCompare(b.path) || a.method.localeCompare(b.method)
    );
  }

  countByGroup(): Map<EndpointGroup, number> {
    const counts = new Map<EndpointGroup, number>();
    for (const e of this.byKey.values()) counts.set(e.group, (counts.get(e.group) ?? 0) + 1);
    return counts;
  }

  /** Endpoints per model they accept (their declared model and any further ones). */
  countByAuth(): Map<AuthModel, number> {
    const counts = new Map<AuthModel, number>();
    for (const e of this.byKey.values())
      for (const model of new Set([e.auth, ...e.auth_also])) counts.set(model, (counts.get(model) ?? 0) + 1);
    return counts;
  }
}
