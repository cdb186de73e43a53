/** Issues credentials through the real admin API, as a new user would. */
import { http } from './service';

export async function registerDid(mainUrl: string, adminToken: string, did: string): Promise<string> {
  const res = await http('POST', `${mainUrl}/admin/dids`, {
    headers: { authorization: `Bearer ${adminToken}` },
    body: { did }
  });
  if (res.status !== 201 && res.status !== 200) throw new Error(`could not register ${did}: ${res.status} ${res.text}`);
  return did;
}

export async function issueHomologousToken(mainUrl: string, adminToken: string, label = 'approver'): Promise<string> {
  const res = await http('POST', `${mainUrl}/admin/homologous-tokens`, {
    headers: { authorization: `Bearer ${adminToken}` },
    body: { label }
  });
  if (res.status !== 201) throw new Error(`could not issue a homologous token: ${res.status} ${res.text}`);
  return res.body.token;
}
