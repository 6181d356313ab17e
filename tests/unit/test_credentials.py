"""Node credentials (DESIGN 9, domain/credentials.py): one node id each, derived one way, checked
in constant time; the manager's word to an agent follows from the node's credential alone."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from domain.credentials import (
    credential_node,
    manager_word,
    node_credential,
    node_secret_from_token,
    own_credential,
    verified_node,
)
from domain.errors import ValidationError

SECRET = "node-secret"


def test_a_credential_proves_its_node_and_no_other() -> None:
    mine = node_credential(SECRET, "n1")
    scheme, node, mac = mine.split(".")
    assert (scheme, node, len(mac)) == ("gsn1", "n1", 64)
    # HMAC-SHA256 of the node id under the node secret (with a label): anyone may check it
    expected = hmac.new(SECRET.encode(), b"greenswarm/node/v1\0n1", hashlib.sha256).hexdigest()
    assert mac == expected
    assert verified_node(mine, SECRET) == "n1"
    assert verified_node(mine, "another secret") is None
    assert verified_node(mine.replace(".n1.", ".n2."), SECRET) is None  # its mac is n1's
    assert verified_node(mine[:-1] + ("0" if mine[-1] != "0" else "1"), SECRET) is None
    assert verified_node(mine, "") is None
    assert node_credential(SECRET, "n2") != mine
    # ids with dots (allowed by check_id) keep their dots
    dotted = node_credential(SECRET, "node.a-1")
    assert credential_node(dotted) == "node.a-1" and verified_node(dotted, SECRET) == "node.a-1"


@pytest.mark.parametrize("presented", [
    "", "n1", "gsn1", "gsn1.n1", "gsn1..abc", "gsn2.n1." + "0" * 64, "gsn1.n1." + "0" * 63,
    "gsn1.-bad." + "0" * 64, "gsn1.n1/x." + "0" * 64,
])
def test_anything_else_is_no_node_credential(presented: str) -> None:
    assert credential_node(presented) is None
    assert verified_node(presented, SECRET) is None


def test_the_node_secret_of_a_token_is_one_way_and_stable() -> None:
    derived = node_secret_from_token("operator-token")
    assert derived == node_secret_from_token("operator-token")
    assert derived != node_secret_from_token("operator-token2")
    assert "operator-token" not in derived and len(derived) == 64
    assert node_secret_from_token("") == ""


def test_the_managers_word_follows_from_the_node_credential_alone() -> None:
    mine = node_credential(SECRET, "n1")
    word = manager_word(mine)
    assert word.startswith("gsm1.") and word != mine
    assert word != manager_word(node_credential(SECRET, "n2"))
    assert mine.split(".")[2] not in word
    with pytest.raises(ValidationError):
        manager_word("the-operators-token")


def test_a_node_uses_its_given_credential_or_derives_one() -> None:
    mine = node_credential(SECRET, "n1")
    assert own_credential("n1", SECRET, "") == mine
    assert own_credential("n1", "", mine) == mine
    with pytest.raises(ValidationError) as other:
        own_credential("n2", "", mine)
    assert other.value.field == "GREENSWARM_NODE_CREDENTIAL" and "n1" in other.value.message
    with pytest.raises(ValidationError) as none:
        own_credential("n1", "", "")
    assert none.value.field == "GREENSWARM_NODE_SECRET"
    with pytest.raises(ValidationError):
        own_credential("n1", "", "operator-token")
