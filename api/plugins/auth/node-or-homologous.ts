/**
 * Model `node_or_homologous`: a node's credentials when they are sent (its key headers, or X-DID alone: a DID linked to
 * a node, see external-node.ts), else the homologous credentials (X-ZR-Token, or X-DID with X-Capture-Token).
 */
import { externalNode } from './external-node';
import { homologous } from './homologous';
import { Authenticator, header } from './principal';

export const nodeOrHomologous: Authenticator = async (request, deps) =>
  header(request, 'x-external-node') ||
  header(request, 'x-external-key') ||
  (header(request, 'x-did') && !header(request, 'x-capture-token'))
    ? externalNode(request, deps)
    : homologous(request, deps);
