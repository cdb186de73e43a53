"""The node's credentials on disk: its id and key (shown once at registration) and the hub they belong to, in a
JSON file only its user can read (mode 0600, as ssh keeps its keys). Written to a temporary file of that mode,
fsynced and renamed, so a crash leaves the old file or the new one, never half of one; a file others can read is
refused when loaded."""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Optional, TypedDict


class NodeCredentials(TypedDict, total=False):
    hub_url: str
    node_id: str
    api_key: str
    registered_at: str


class CredentialsError(Exception):
    pass


def write_private_file(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` atomically, mode 0600, fsynced (the file and its directory)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask or an older file of that name
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    sync_directory(directory)


def save_credentials(path: str, credentials: NodeCredentials) -> None:
    write_private_file(path, json.dumps(credentials, indent=2) + "\n")


def load_credentials(path: str) -> Optional[NodeCredentials]:
    """The credentials in ``path``, or None when there is none; raises on a file others can read or a broken one."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if sys.platform != "win32" and st.st_mode & 0o077:
        raise CredentialsError(
            f"{path} can be read by others (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it, or register again"
        )
    try:
        with open(path, encoding="utf-8") as f:
            parsed = json.load(f)
    except ValueError:
        raise CredentialsError(f"{path} is not a credentials file (not JSON)") from None
    if not all(isinstance(parsed.get(k), str) for k in ("node_id", "api_key", "hub_url")):
        raise CredentialsError(f"{path} lacks hub_url, node_id or api_key")
    return parsed


def sync_directory(directory: str) -> None:
    """Makes a rename inside ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
