"""The lab's network: one Linux bridge, one namespace + veth pair per node, one forward rule.

Nodes get no default route, so they can reach each other and the host's bridge address (the
Swarm manager at the gateway) and nothing else. The only firewall change is one rule that lets
frames between ports of the lab bridge pass the host's FORWARD chain (br_netfilter sends bridged
frames through iptables, and Docker sets that chain's policy to DROP); it is tagged with a
comment and removed by `down`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from lab.errors import CommandFailedError
from lab.model import NodeRecord
from lab.proc import run

RULE_COMMENT = "greenswarm-lab"
BR_NETFILTER_SYSCTL = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def _ip_json(argv: list[str]) -> list[dict[str, Any]]:
    done = run(["ip", "-j", *argv], check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return []
    data = json.loads(done.stdout)
    return data if isinstance(data, list) else []


def link_exists(name: str, netns: str | None = None) -> bool:
    prefix = ["-n", netns] if netns else []
    return bool(_ip_json([*prefix, "link", "show", "dev", name]))


def _addresses(name: str, netns: str | None = None) -> set[str]:
    prefix = ["-n", netns] if netns else []
    found: set[str] = set()
    for link in _ip_json([*prefix, "addr", "show", "dev", name]):
        for info in link.get("addr_info", []):
            found.add(f"{info.get('local')}/{info.get('prefixlen')}")
    return found


def ensure_bridge(name: str, cidr: str) -> bool:
    """Create the bridge with ``cidr`` (e.g. 10.123.0.1/24) and bring it up; True if created."""
    created = False
    if not link_exists(name):
        run(["ip", "link", "add", name, "type", "bridge"])
        created = True
    if cidr not in _addresses(name):
        run(["ip", "addr", "add", cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])
    return created


def delete_link(name: str) -> bool:
    """Delete a link; False when there was none. A link that goes away between the check and
    the delete (a veth whose peer's namespace was just removed: the kernel deletes the pair a
    moment later) counts as deleted."""
    if not link_exists(name):
        return False
    try:
        run(["ip", "link", "del", name])
    except CommandFailedError:
        if link_exists(name):
            raise
    return True


def list_netns(netns_dir: Path) -> list[str]:
    try:
        return sorted(p.name for p in netns_dir.iterdir())
    except OSError:
        return []


def netns_exists(netns_dir: Path, name: str) -> bool:
    return (netns_dir / name).exists()


def ensure_node_network(node: NodeRecord, bridge: str, prefixlen: int, netns_dir: Path) -> bool:
    """Namespace, veth pair (host side on the bridge, ``eth0`` inside), address, links up.

    Idempotent: each step checks first. True if the namespace was created.
    """
    created = False
    if not netns_exists(netns_dir, node.netns):
        run(["ip", "netns", "add", node.netns])
        created = True
    if not link_exists("eth0", node.netns):
        if link_exists(node.veth_host):
            run(["ip", "link", "del", node.veth_host])
        run(["ip", "link", "add", node.veth_host, "type", "veth",
             "peer", "name", "eth0", "netns", node.netns])
    run(["ip", "link", "set", node.veth_host, "master", bridge, "up"])
    cidr = f"{node.address}/{prefixlen}"
    if cidr not in _addresses("eth0", node.netns):
        run(["ip", "-n", node.netns, "addr", "add", cidr, "dev", "eth0"])
    run(["ip", "-n", node.netns, "link", "set", "eth0", "up"])
    run(["ip", "-n", node.netns, "link", "set", "lo", "up"])
    return created


def delete_node_network(node: NodeRecord, netns_dir: Path) -> None:
    """Remove the node's namespace (its veth pair goes with it) and a stray host veth."""
    if netns_exists(netns_dir, node.netns):
        run(["ip", "netns", "del", node.netns])
    delete_link(node.veth_host)


def _iptables() -> str | None:
    return shutil.which("iptables")


def forward_rule(bridge: str) -> list[str]:
    return ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment",
            "--comment", RULE_COMMENT, "-j", "ACCEPT"]


def ensure_forward_rule(bridge: str) -> bool:
    """Accept frames between the lab's own bridge ports; True if the rule was added now."""
    iptables = _iptables()
    if iptables is None:
        return False
    rule = forward_rule(bridge)
    if run([iptables, "-w", "5", "-C", *rule], check=False).returncode == 0:
        return False
    run([iptables, "-w", "5", "-I", *rule])
    return True


def remove_forward_rules() -> int:
    """Delete every FORWARD rule carrying the lab's comment; return how many."""
    iptables = _iptables()
    if iptables is None:
        return 0
    listing = run([iptables, "-w", "5", "-S", "FORWARD"], check=False).stdout
    removed = 0
    for line in listing.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] == "-A" and RULE_COMMENT in words:
            run([iptables, "-w", "5", "-D", *_unquote(words[1:])], check=False)
            removed += 1
    return removed


def lab_rules_present() -> bool:
    iptables = _iptables()
    if iptables is None:
        return False
    listing = run([iptables, "-w", "5", "-S"], check=False).stdout
    return RULE_COMMENT in listing


def _unquote(words: list[str]) -> list[str]:
    return [w.strip('"') for w in words]
