"""pytest plugin: the A2A conformance kit's requests to the hub carry a credential.

The kit (a2aproject/a2a-tck, branch 1.0-dev) sends none, and the hub's A2A binding takes a node key, a
homologous token or an OAuth access token. This adds `X-ZR-Token: $TCK_ZR_TOKEN` to every request the kit's
httpx clients send to the hub (host and port of $TCK_SUT, e.g. http://127.0.0.1:3000), and leaves the others
(the kit's own webhook receiver) alone. docs/a2a.md#the-conformance-kit says how to run the kit with it:

    PYTHONPATH=<repo>/test/support TCK_SUT=http://127.0.0.1:3000 TCK_ZR_TOKEN=<token> \
      python run_tck.py --sut-host http://127.0.0.1:3000 --level must -- -p tck_auth
"""
import os
from urllib.parse import urlsplit

import httpx

_TOKEN = os.environ["TCK_ZR_TOKEN"]
_SUT = urlsplit(os.environ["TCK_SUT"]).netloc
_HOSTS = {_SUT, _SUT.replace("127.0.0.1", "localhost")}
_send = httpx.Client.send


def _send_with_token(self, request, *args, **kwargs):
    if request.url.netloc.decode() in _HOSTS and "x-zr-token" not in request.headers:
        request.headers["X-ZR-Token"] = _TOKEN
    return _send(self, request, *args, **kwargs)


httpx.Client.send = _send_with_token
