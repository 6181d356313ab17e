"""The lab's network: one Linux bridge per cluster, one namespace + veth pair per node, forward
rules, and the delay between clusters.

Nodes get no default route, so they can reach each other and the host's bridge address (the
Swarm manager at the gateway) and nothing else; with several clusters, also a route to each other
cluster's subnet through their own bridge's gateway (the host forwards between the bridges). The
only firewall changes are rules that let frames between ports of a lab bridge, and packets
between two lab bridges, pass the host's FORWARD chain (br_netfilter sends bridged frames through
iptables, and Docker sets that chain's policy to DROP); they are tagged with a comment and
removed by `down`.

The delay between clusters (DESIGN 12) is a ``netem`` qdisc on the egress of every cluster
bridge, reached only by packets whose source is another cluster's subnet: a packet from cluster
1 to cluster 2 waits once, on its way into ``gsbr1``, and the answer once, on its way into
``gsbr0``. Traffic inside a cluster never crosses a bridge's own egress (bridged frames leave by
the ports' veths), and the host's own packets carry the bridge's address as their source, so
neither is delayed. Where the kernel has no netem, mangle-table rules send the packets routed
between two cluster bridges to the NFQUEUE of :mod:`lab.delay` instead (same places, same
effect: each direction waits once).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.errors import CommandFailedError
from lab.model import LatencyState, NodeRecord
from lab.proc import run

RULE_COMMENT = "greenswarm-lab"
BR_NETFILTER_SYSCTL = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
IP_FORWARD_SYSCTL = Path("/proc/sys/net/ipv4/ip_forward")
DELAY_CLASS = "1:2"
HTB_RATE = "10gbit"  # the classes only sort packets; nothing near this rate crosses a bridge


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


def ensure_routes(node: NodeRecord, subnets: Sequence[str], gateway: str) -> None:
    """Routes from the node's namespace to other clusters' ``subnets`` via its bridge's
    ``gateway`` (the host); idempotent (``route replace``)."""
    for subnet in subnets:
        run(["ip", "-n", node.netns, "route", "replace", subnet, "via", gateway, "dev", "eth0"])


def ensure_ip_forward() -> bool:
    """Let the host route between the cluster bridges; True if forwarding was off and is on now."""
    try:
        if IP_FORWARD_SYSCTL.read_text().strip() == "1":
            return False
        IP_FORWARD_SYSCTL.write_text("1\n")
    except OSError as exc:
        raise CommandFailedError(["write", str(IP_FORWARD_SYSCTL)], 1, str(exc)) from exc
    return True


def disable_ip_forward() -> None:
    try:
        IP_FORWARD_SYSCTL.write_text("0\n")
    except OSError as exc:
        raise CommandFailedError(["write", str(IP_FORWARD_SYSCTL)], 1, str(exc)) from exc


def delay_commands(bridge: str, from_subnets: Sequence[str], delay_ms: float) -> list[list[str]]:
    """The tc commands (pure): an htb root whose default class passes packets straight on, and
    a second class with a netem leaf that packets from ``from_subnets`` are filtered into."""
    dev = ["dev", bridge]
    argvs = [
        ["tc", "qdisc", "replace", *dev, "root", "handle", "1:", "htb", "default", "1"],
        ["tc", "class", "replace", *dev, "parent", "1:", "classid", "1:1", "htb",
         "rate", HTB_RATE],
        ["tc", "class", "replace", *dev, "parent", "1:", "classid", DELAY_CLASS, "htb",
         "rate", HTB_RATE],
        ["tc", "qdisc", "replace", *dev, "parent", DELAY_CLASS, "handle", "2:", "netem",
         "delay", f"{delay_ms:g}ms"],
    ]
    argvs += [["tc", "filter", "replace", *dev, "parent", "1:", "protocol", "ip",
               "prio", str(prio), "u32", "match", "ip", "src", subnet, "flowid", DELAY_CLASS]
              for prio, subnet in enumerate(from_subnets, start=1)]
    return argvs


def delay_in_place(bridge: str, delay_ms: float) -> bool:
    """True when the bridge already has the lab's netem qdisc with this delay."""
    done = run(["tc", "-j", "qdisc", "show", "dev", bridge], check=False)
    try:
        qdiscs = json.loads(done.stdout) if done.returncode == 0 else []
    except json.JSONDecodeError:
        return False
    for qdisc in qdiscs if isinstance(qdiscs, list) else []:
        if qdisc.get("kind") == "netem":
            delay = qdisc.get("options", {}).get("delay", {}).get("delay")
            return isinstance(delay, int | float) and abs(delay * 1000 - delay_ms) < 1e-3
    return False


def ensure_delay(bridge: str, from_subnets: Sequence[str], delay_ms: float) -> LatencyState:
    """Delay packets entering ``bridge`` from ``from_subnets`` by ``delay_ms``.

    Returns UNAVAILABLE (and leaves the bridge without a qdisc of ours) when the kernel has no
    ``netem``; NONE when no delay is wanted.
    """
    if delay_ms <= 0 or not from_subnets:
        remove_delay(bridge)
        return LatencyState.NONE
    if delay_in_place(bridge, delay_ms):
        return LatencyState.NETEM
    for argv in delay_commands(bridge, from_subnets, delay_ms):
        done = run(argv, check=False)
        if done.returncode == 0:
            continue
        remove_delay(bridge)
        if "netem" in argv and ("unknown" in done.stderr or "Invalid qdisc" in done.stderr):
            return LatencyState.UNAVAILABLE
        raise CommandFailedError(argv, done.returncode, done.stderr)
    return LatencyState.NETEM


def remove_delay(bridge: str) -> None:
    """Drop the bridge's root qdisc (its classes, filters and netem go with it)."""
    if link_exists(bridge):
        run(["tc", "qdisc", "del", "dev", bridge, "root"], check=False)


def _iptables() -> str | None:
    return shutil.which("iptables")


def forward_rule(bridge: str, out_bridge: str | None = None) -> list[str]:
    return ["FORWARD", "-i", bridge, "-o", out_bridge or bridge, "-m", "comment",
            "--comment", RULE_COMMENT, "-j", "ACCEPT"]


def ensure_forward_rule(bridge: str, out_bridge: str | None = None) -> bool:
    """Accept frames between the lab's own bridge ports (or, with ``out_bridge``, packets routed
    from one lab bridge to another); True if the rule was added now."""
    iptables = _iptables()
    if iptables is None:
        return False
    rule = forward_rule(bridge, out_bridge)
    if run([iptables, "-w", "5", "-C", *rule], check=False).returncode == 0:
        return False
    run([iptables, "-w", "5", "-I", *rule])
    return True


def queue_rule(bridge: str, out_bridge: str, queue: int) -> list[str]:
    """Packets routed from one cluster bridge to another go to the delay's queue first (mangle
    runs before the filter table's ACCEPT); with no reader they pass (``--queue-bypass``)."""
    return ["FORWARD", "-i", bridge, "-o", out_bridge, "-m", "comment", "--comment",
            RULE_COMMENT, "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]


def ensure_queue_rules(bridges: Sequence[str], queue: int) -> bool:
    """A queue rule for every ordered pair of ``bridges``; True if one was added now."""
    iptables = _iptables()
    if iptables is None:
        raise CommandFailedError(["iptables"], 1, "iptables is not installed")
    added = False
    for rule in (queue_rule(a, b, queue) for a in bridges for b in bridges if a != b):
        if run([iptables, "-w", "5", "-t", "mangle", "-C", *rule], check=False).returncode:
            run([iptables, "-w", "5", "-t", "mangle", "-A", *rule])
            added = True
    return added


def remove_forward_rules(tables: Sequence[str] = ("filter", "mangle")) -> int:
    """Delete every FORWARD rule carrying the lab's comment; return how many."""
    iptables = _iptables()
    if iptables is None:
        return 0
    removed = 0
    for table in tables:
        listing = run([iptables, "-w", "5", "-t", table, "-S", "FORWARD"], check=False).stdout
        for line in listing.splitlines():
            words = line.split()
            if len(words) > 2 and words[0] == "-A" and RULE_COMMENT in _unquote(words):
                run([iptables, "-w", "5", "-t", table, "-D", *_unquote(words[1:])], check=False)
                removed += 1
    return removed


def lab_rules_present() -> bool:
    iptables = _iptables()
    if iptables is None:
        return False
    return any(RULE_COMMENT in run([iptables, "-w", "5", "-t", table, "-S"], check=False).stdout
               for table in ("filter", "mangle"))


def _unquote(words: list[str]) -> list[str]:
    return [w.strip('"') for w in words]
