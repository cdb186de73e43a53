/** Model `node_or_homologous`: a node's headers when any is sent, else the homologous credentials. */
import { externalNode } from './external-node';
import { homologous } from './homologous';
import { Authenticator, header } from './principal';

export const nodeOrHomologous: Authenticator = async (request, deps) =>
  header(request, 'x-external-node') || header(request, 'x-external-key')
    ? externalNode(request, deps)
    : homologous(request, deps);
