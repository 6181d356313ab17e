"""Node identity (DESIGN 9): who may report a host's measurements, and whose word a node's agent
takes. Pure: HMAC-SHA256 over strings, no I/O.

Four secrets, each derived one way from the one before it, so that holding one never gives the
one before it:

1. The operator's token (``GREENSWARM_TOKEN``) manages requests. No node ever holds it.
2. The node secret (``GREENSWARM_NODE_SECRET``; when unset, the manager derives it from the
   token with :func:`node_secret_from_token`, and ``greenswarm node-secret`` prints it). The
   manager (or ``greenswarm registry``) and the nodes' agents and monitors hold it.
3. A node's credential, ``gsn1.<node id>.<HMAC-SHA256(node secret, node id)>``
   (:func:`node_credential`): what its agent and monitor present to the registries. It proves
   one node id; the registries let it write that host's utilization, power and tasks and
   nothing else. A node may be given only its own credential (``GREENSWARM_NODE_CREDENTIAL``,
   printed by ``greenswarm node-credential NODE_ID``) instead of the node secret: then it cannot
   speak for any other node.
4. The manager's word to that node's agent, ``gsm1.<HMAC-SHA256(node credential, ...)>``
   (:func:`manager_word`): the only bearer token the agent takes, so it acts on the manager's
   calls alone, and the agent can check it with nothing but its own credential.

Every comparison is constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac

from domain.errors import ValidationError
from domain.model import ID_PATTERN

NODE_SCHEME = "gsn1"  # a node's credential: gsn1.<node id>.<64 hex digits>
MANAGER_SCHEME = "gsm1"  # the manager's word to one agent: gsm1.<64 hex digits>
_NODE_SECRET_LABEL = b"greenswarm/node-secret/v1"
_NODE_LABEL = "greenswarm/node/v1\0"
_MANAGER_LABEL = b"greenswarm/manager-to-agent/v1"
_MAC_HEX_CHARS = 64


def _mac(key: str | bytes, message: str | bytes) -> str:
    key_bytes = key.encode() if isinstance(key, str) else key
    data = message.encode() if isinstance(message, str) else message
    return hmac.new(key_bytes, data, hashlib.sha256).hexdigest()


def node_secret_from_token(token: str) -> str:
    """The node secret a manager uses when none is set: one way from the operator's token, so
    the nodes that hold it cannot recover the token ("" without a token: no node is taken)."""
    return _mac(token, _NODE_SECRET_LABEL) if token else ""


def node_credential(node_secret: str, node_id: str) -> str:
    """The credential of ``node_id`` under ``node_secret``."""
    if not node_secret:
        raise ValidationError("GREENSWARM_NODE_SECRET", "is empty")
    if not ID_PATTERN.fullmatch(node_id):
        raise ValidationError("node_id", f"{node_id!r} is not a node id")
    return f"{NODE_SCHEME}.{node_id}.{_mac(node_secret, _NODE_LABEL + node_id)}"


def credential_node(credential: str) -> str | None:
    """The node id a credential claims (not yet verified); None when it is no node credential."""
    scheme, _, rest = credential.partition(".")
    node_id, _, mac = rest.rpartition(".")
    if scheme != NODE_SCHEME or len(mac) != _MAC_HEX_CHARS or not ID_PATTERN.fullmatch(node_id):
        return None
    return node_id


def verified_node(presented: str, node_secret: str) -> str | None:
    """The node id ``presented`` proves under ``node_secret``, else None (constant-time)."""
    node_id = credential_node(presented)
    if node_id is None or not node_secret:
        return None
    expected = node_credential(node_secret, node_id)
    return node_id if hmac.compare_digest(presented.encode(), expected.encode()) else None


def manager_word(credential: str) -> str:
    """The bearer token the manager presents to the agent of the node ``credential`` names."""
    if credential_node(credential) is None:
        raise ValidationError("GREENSWARM_NODE_CREDENTIAL", "is not a node credential "
                              f"({NODE_SCHEME}.<node id>.<64 hex digits>)")
    return f"{MANAGER_SCHEME}.{_mac(credential, _MANAGER_LABEL)}"


def own_credential(node_id: str, node_secret: str, given: str) -> str:
    """What a node's agent or monitor presents: ``given`` (its own credential, which must name
    ``node_id``), else the one derived from ``node_secret``; a ValidationError naming the
    setting when it has neither, or a credential of another node."""
    if given:
        claimed = credential_node(given)
        if claimed is None:
            raise ValidationError("GREENSWARM_NODE_CREDENTIAL", "is not a node credential "
                                  f"({NODE_SCHEME}.<node id>.<64 hex digits>)")
        if claimed != node_id:
            raise ValidationError("GREENSWARM_NODE_CREDENTIAL",
                                  f"names node {claimed!r}, but this is node {node_id!r}")
        return given
    if not node_secret:
        raise ValidationError("GREENSWARM_NODE_SECRET", "is required (or "
                              "GREENSWARM_NODE_CREDENTIAL): the nodes' shared secret, which the "
                              "manager's `greenswarm node-secret` prints")
    return node_credential(node_secret, node_id)
