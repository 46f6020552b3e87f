"""Configuration: one YAML file plus environment overrides, validated at start-up.

The same image runs on a laptop and in a Kubernetes StatefulSet: every key can be set in the file
(``weir start --config weir.yaml``) or by an environment variable named after its path, e.g.
``broker.cluster.nodeId`` ← ``WEIR_BROKER_CLUSTER_NODE_ID``. Precedence: defaults < file < environment < command line.
A bad value stops start-up with a message naming the key.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

DEFAULTS: dict[str, Any] = {
    "broker": {
        "dataDir": "./data",
        "host": "127.0.0.1",
        "cluster": {
            "nodeId": 0,
            "clusterSize": 1,
            "partitionsCount": 1,
            "replicationFactor": 1,
            # The brokers' Raft addresses "host:raftBasePort", in node-id order (empty: a single broker).
            "initialContactPoints": [],
            # Encrypts and authenticates Raft traffic; required when partitions are replicated.
            "raftPassword": "",
        },
        "ports": {"command": 26501, "raft": 26502, "monitoring": 9600},
        # Bearer token for the monitoring port's admin POSTs (snapshot, pause/resume exporting). Empty: those are
        # accepted only when broker.host is a loopback address, refused otherwise (see broker/monitoring.py).
        "adminToken": "",
        # `weir broker` also serves the client API itself when true (single broker only); `weir start` always does.
        "embeddedGateway": False,
        "snapshotPeriod": 300.0,
        # Log segment files roll at this size; compaction deletes whole segments only, so small disks need small ones.
        "logSegmentSize": 64 * 1024 * 1024,
        # Below this many free bytes under dataDir, partitions reject new commands until space is back.
        "minFreeDiskBytes": 256 * 1024 * 1024,
        # Element activations one process instance may make without reaching a wait state (one chain of follow-ups)
        # before it is stopped with an incident, so a loop without a wait state cannot hold a partition; 0: no limit.
        "maxStepsPerInstance": 10_000,
        # Process instances in one chain of call activities, the root included (Zeebe's maxProcessDepth): a call
        # activity that would go deeper raises an incident; 0: no limit.
        "maxProcessDepth": 1000,
        # Camunda 8.9's business id uniqueness control: when true, creating a process instance with a business id
        # that an active root instance of the same process (and tenant) already has is rejected (ALREADY_EXISTS /
        # 409). Instances started by call activities do not count. Off by default, as in Camunda.
        "businessIdUniqueness": False,
        # Who may do what (Camunda's camunda.security.authorizations.enabled, off by default): when on, a command of an
        # authenticated caller needs a permission granted to it, directly or through its groups, roles and mapping
        # rules (README, "Tenants and access"). Tenant assignments are checked whenever authentication is on.
        "security": {
            "authorizations": {"enabled": False},
            # The identity created at start where missing (Camunda's camunda.security.initialization): users
            # ({username, password, name, email}; the password in plain text, hashed before it is stored: keep it out
            # of files, e.g. WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD) and the users and clients of the
            # role 'admin', which is granted every permission. It only adds: see README, "Tenants and access".
            "initialization": {"users": [], "defaultRoles": {"admin": {"users": [], "clients": []}}},
        },
        # Process instances one chain of signal broadcasts may start (a signal, the instances its start events start,
        # the signals they broadcast without waiting, ...) before the next one stops with an incident; 0: no limit.
        "maxInstancesPerSignalChain": 1000,
        # Process instances one chain of follow-ups may start by recursion (a called instance of a process already
        # on its call stack, e.g. a process calling itself twice in parallel, which the depth alone cannot bound)
        # before the next one stops with an incident; 0: no limit.
        "maxRecursiveInstancesPerChain": 1000,
        # What one FEEL evaluation may spend: steps (about one per evaluated node; the default is ~100 ms of work)
        # and size (characters and list/context items produced, ~bytes). Over either, the expression fails with an
        # incident naming it. A result larger than gateway.maxMessageSize is refused the same way.
        "expressions": {"maxSteps": 500_000, "maxSize": 16_000_000},
        # What checking one deployment may spend on the partition's loop, as counts (so replay decides alike): the
        # resources in it, the XML elements they hold together, and the invalid resources checked before the rest
        # are skipped (the rejection lists the first problems and says how many more there were).
        "deployments": {"maxResources": 1000, "maxElements": 200_000, "maxInvalidResources": 10},
        # Admission control per partition leader: fixed | aimd | vegas | gradient (enabled: false admits all).
        "backpressure": {
            "enabled": True,
            "algorithm": "gradient",
            "initialLimit": 100,
            "minLimit": 10,
            "maxLimit": 5000,
            "expectedRtt": 0.2,
        },
        # Exporters by id. `weir start` adds the history exporter (<dataDir>/history.db) unless told otherwise.
        "exporters": {},
    },
    "gateway": {
        "host": "127.0.0.1",
        "port": 26500,
        "monitoringPort": 9600,
        "contactPoints": ["127.0.0.1:26501"],
        "maxMessageSize": 4 * 1024 * 1024,
        "longPollTimeout": 10_000,
        "requestTimeout": 15_000,
        # HTTP/2 streams a client connection may have open at once; clients queue calls beyond it.
        "maxConcurrentStreams": 2048,
        # The REST API (Camunda 8.8 Orchestration Cluster API, /v2) on gateway.host; 0: a free port, -1: off.
        "rest": {
            "port": 8080,
            # Origins (scheme://host[:port]) of web pages allowed to call the API from a browser (CORS); "*": any.
            # Other pages are refused; the web view on this port is always allowed.
            "allowedOrigins": [],
            # Host names clients use for the API besides loopback names and gateway.host; "*": any (DNS rebinding).
            "allowedHosts": [],
            # Open connections at most: a new one over it closes the longest idle one, or is closed itself.
            "maxConnections": 512,
            # Seconds for a request head (from its first byte), for a request body, and for an idle connection.
            "headerTimeout": 10.0,
            "bodyTimeout": 30.0,
            "idleTimeout": 60.0,
            # Variable values one search with truncateValues=false returns at most (the page ends early beyond it),
            # and how many such searches run at once.
            "maxResponseBytes": 32 * 1024 * 1024,
            "maxConcurrentLargeResponses": 2,
        },
        # Tenants (Camunda's multi-tenancy, off by default as there): when enabled, requests that deploy, create,
        # publish, correlate, broadcast, evaluate or activate name their tenant (tenantId, up to 31 of [A-Za-z0-9_.-]),
        # and each tenant has its own process and decision versions, messages, signals and jobs. When disabled every
        # request is in the default tenant '<default>'.
        "multiTenancy": {"enabled": False},
        # The history store the REST API's searches read: sqlite:///path/history.db or postgresql://user@host/db.
        # Empty: `weir start` reads <dataDir>/history.db; a standalone gateway answers searches with 503.
        "history": {"url": ""},
        # Off by default: the gateway binds loopback only. Anything reachable from a network needs TLS and auth.
        "security": {
            # Server certificate and key (PEM); with clientCaPath, clients must present a certificate it signed.
            "tls": {"enabled": False, "certificateChainPath": "", "privateKeyPath": "", "clientCaPath": ""},
            "authentication": {
                # Any of oauth, basic; empty lets every call in.
                "methods": [],
                # Bearer JWTs validated offline: signature against a JWKS (file or URL), then exp, iss and aud.
                "oauth": {
                    "jwksPath": "",
                    "jwksUrl": "",
                    "jwksCaPath": "",
                    "jwksRefreshInterval": 300.0,
                    "issuer": "",
                    "audience": "",
                    "algorithms": ["RS256"],
                    "leeway": 30.0,
                },
                # Lines "user:scrypt$…" (make them with `weir hash-password`). Accepted credentials are remembered
                # for cacheTtl seconds; each client address may fail failuresPerMinute checks a minute, then new
                # credentials from it are refused without a check until it waits (0: no limit).
                "basic": {"usersFile": "", "cacheTtl": 60.0, "failuresPerMinute": 30},
                # Seconds a gateway keeps what the cluster's identity says about a caller (its stored password,
                # tenants, grants, groups and roles): the bound within which a changed password or a revoked
                # permission reaches every gateway's sign-ins and reads (commands are checked by the brokers at once).
                "identityCacheTtl": 10.0,
            },
        },
    },
    # The brokers' command API (gateways → brokers, and brokers → brokers between partitions). Both sides read this
    # section. Open by default, for brokers and gateways on one machine's loopback.
    "commandApi": {
        # Every caller sends it; the broker compares it in constant time. Empty: no check.
        "secret": "",
        "tls": {
            "enabled": False,
            # This process's certificate and key: served by brokers, presented by callers when the CA requires it.
            "certificateChainPath": "",
            "privateKeyPath": "",
            # The CA that signed the brokers' (and, for mTLS, the callers') certificates.
            "caPath": "",
            # Brokers refuse callers without a certificate signed by caPath (mTLS).
            "requireClientCertificate": False,
            # The name to check in brokers' certificates when it differs from the address dialled.
            "serverName": "",
        },
    },
    "logging": {"level": "INFO", "format": "text"},
    # PUT /v2/clock and POST /v2/clock/reset pin and reset the engine's clock on every partition (Camunda's
    # zeebe.clock.controlled): for tests only, off by default.
    "clock": {"controlled": False},
}


MIN_LOG_SEGMENT_SIZE = 1024 * 1024


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range; the message names the key."""


def _env_name(path: tuple[str, ...]) -> str:
    parts = []
    for p in path:
        parts.append(re.sub(r"(?<!^)(?=[A-Z])", "_", p).upper())
    return "WEIR_" + "_".join(parts)


def _coerce(path: str, default: Any, raw: str) -> Any:
    """Parse an environment value into the type of the key's default."""
    try:
        if isinstance(default, bool):
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, list):
            return [x.strip() for x in raw.split(",") if x.strip()]
        if isinstance(default, dict):
            value = yaml.safe_load(raw)
            if not isinstance(value, dict):
                raise ValueError(raw)
            return value
    except ValueError:
        raise ConfigError(f"{path}: cannot use '{raw}' (expected {type(default).__name__})") from None
    return raw


def _merge(base: dict[str, Any], override: Mapping[str, Any], prefix: str = "") -> None:
    for key, value in override.items():
        path = f"{prefix}{key}"
        if key not in base:
            raise ConfigError(f"{path}: unknown configuration key")
        if isinstance(base[key], dict) and key != "exporters":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{path}: expected a mapping")
            _merge(base[key], value, path + ".")
        else:
            base[key] = value


def _apply_env(config: dict[str, Any], env: Mapping[str, str], path: tuple[str, ...] = ()) -> None:
    for key, value in config.items():
        here = (*path, key)
        if isinstance(value, dict) and key != "exporters":
            _apply_env(value, env, here)
            continue
        name = _env_name(here)
        if name in env:
            config[key] = _coerce(".".join(here), value, env[name])
        elif isinstance(value, list) and any(n.startswith(name + "_") and n[len(name) + 1 : len(name) + 2].isdigit()
                                             for n in env):  # fmt: skip
            config[key] = _indexed_env(".".join(here), value, env, name)
    exporters = config.get("exporters") if path == ("broker",) else None
    if exporters is not None:
        _apply_exporter_env(exporters, env)


def _indexed_env(path: str, items: list[Any], env: Mapping[str, str], name: str) -> list[Any]:
    """``<NAME>_<i>_<FIELD>`` sets a field of the i-th mapping of a list (the file's, extended as needed), as Spring
    does for Camunda's lists: ``WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD``."""
    out = [dict(item) if isinstance(item, Mapping) else item for item in items]
    for env_name, raw in env.items():
        m = re.fullmatch(re.escape(name) + r"_(\d+)_([A-Z0-9_]+)", env_name)
        if m is None:
            continue
        index = int(m.group(1))
        if index > len(out) + 100:
            raise ConfigError(f"{path}: index {index} of {env_name} is far past the list's end")
        while len(out) <= index:
            out.append({})
        if not isinstance(out[index], dict):
            raise ConfigError(f"{path}[{index}]: not a mapping, so {env_name} cannot set a field of it")
        out[index][_camel(m.group(2))] = raw
    return out


def _apply_exporter_env(exporters: dict[str, Any], env: Mapping[str, str]) -> None:
    """``WEIR_BROKER_EXPORTERS_<ID>_CLASSNAME`` and ``…_ARGS_<KEY>`` configure exporters by id, as in Zeebe."""
    prefix = "WEIR_BROKER_EXPORTERS_"
    for name, raw in env.items():
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix) :]
        m = re.match(r"([A-Z0-9]+)_(CLASSNAME|ARGS_(.+))$", rest)
        if not m:
            continue
        exporter_id = m.group(1).lower()
        entry = exporters.setdefault(exporter_id, {})
        if m.group(2) == "CLASSNAME":
            entry["className"] = raw
        else:
            arg = _camel(m.group(3))
            entry.setdefault("args", {})[arg] = _exporter_arg(arg, raw)


# Secrets and addresses stay text even when they look like numbers or booleans ("12345", "yes").
_TEXT_ARGS = ("password", "username", "apikey", "url", "token", "secret")


def _exporter_arg(name: str, raw: str) -> Any:
    if not raw or any(word in name.lower() for word in _TEXT_ARGS):
        return raw
    return yaml.safe_load(raw)


def _camel(upper_snake: str) -> str:
    head, *rest = upper_snake.lower().split("_")
    return head + "".join(p.capitalize() for p in rest)


def node_id_from_hostname(hostname: str) -> int | None:
    """A StatefulSet pod name ends in its ordinal: ``weir-broker-2`` → 2."""
    m = re.search(r"-(\d+)$", hostname)
    return int(m.group(1)) if m else None


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Defaults, then the YAML file, then ``WEIR_…`` environment variables; validated."""
    env = os.environ if env is None else env
    config = copy.deepcopy(DEFAULTS)
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as e:
            raise ConfigError(f"cannot read configuration file {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"configuration file {path} is not valid YAML: {e}") from None
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"configuration file {path} must hold a mapping at the top level")
        _merge(config, loaded)
    _apply_env(config, env)
    if "WEIR_BROKER_CLUSTER_NODE_ID" not in env and env.get("WEIR_NODE_ID_FROM_HOSTNAME"):
        ordinal = node_id_from_hostname(env.get("HOSTNAME", ""))
        if ordinal is not None:
            config["broker"]["cluster"]["nodeId"] = ordinal
    validate(config)
    return config


def validate(config: dict[str, Any]) -> None:
    cluster = config["broker"]["cluster"]
    for key in ("nodeId", "clusterSize", "partitionsCount", "replicationFactor"):
        if not isinstance(cluster[key], int) or isinstance(cluster[key], bool):
            raise ConfigError(f"broker.cluster.{key}: expected an integer, got {cluster[key]!r}")
    if cluster["clusterSize"] < 1:
        raise ConfigError("broker.cluster.clusterSize: must be at least 1")
    if not 0 <= cluster["nodeId"] < cluster["clusterSize"]:
        raise ConfigError(
            f"broker.cluster.nodeId: {cluster['nodeId']} is outside 0..{cluster['clusterSize'] - 1} (clusterSize)"
        )
    if not 1 <= cluster["partitionsCount"] <= 8191:
        raise ConfigError("broker.cluster.partitionsCount: must be between 1 and 8191")
    if not 1 <= cluster["replicationFactor"] <= cluster["clusterSize"]:
        raise ConfigError(
            f"broker.cluster.replicationFactor: {cluster['replicationFactor']} must be between 1 and clusterSize "
            f"({cluster['clusterSize']})"
        )
    for section, key in (("broker", "ports"),):
        for name, port in config[section][key].items():
            if not isinstance(port, int) or not 0 <= port <= 65535:
                raise ConfigError(f"{section}.{key}.{name}: not a port number: {port!r}")
    if not isinstance(config["broker"]["adminToken"], str):
        raise ConfigError("broker.adminToken: expected a string (quote it in YAML)")
    segment_size = config["broker"]["logSegmentSize"]
    if not isinstance(segment_size, int) or isinstance(segment_size, bool) or segment_size < MIN_LOG_SEGMENT_SIZE:
        raise ConfigError(f"broker.logSegmentSize: must be an integer of at least {MIN_LOG_SEGMENT_SIZE} bytes")
    steps = config["broker"]["maxStepsPerInstance"]
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ConfigError("broker.maxStepsPerInstance: must be an integer of at least 0 (0: no limit)")
    for key in ("maxProcessDepth", "maxInstancesPerSignalChain", "maxRecursiveInstancesPerChain"):
        value = config["broker"][key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"broker.{key}: must be an integer of at least 0 (0: no limit)")
    if not isinstance(config["broker"]["businessIdUniqueness"], bool):
        raise ConfigError("broker.businessIdUniqueness: expected true or false")
    if not isinstance(config["broker"]["security"]["authorizations"]["enabled"], bool):
        raise ConfigError("broker.security.authorizations.enabled: expected true or false")
    _validate_initialization(config["broker"]["security"]["initialization"])
    if not isinstance(config["gateway"]["multiTenancy"]["enabled"], bool):
        raise ConfigError("gateway.multiTenancy.enabled: expected true or false")
    for key, value in config["broker"]["expressions"].items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"broker.expressions.{key}: must be a positive integer")
    for key, value in config["broker"]["deployments"].items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"broker.deployments.{key}: must be a positive integer")
    bp = config["broker"]["backpressure"]
    if bp["algorithm"] not in ("fixed", "aimd", "vegas", "gradient"):
        raise ConfigError(
            f"broker.backpressure.algorithm: '{bp['algorithm']}' is not one of fixed, aimd, vegas, gradient"
        )
    if not 1 <= bp["minLimit"] <= bp["initialLimit"] <= bp["maxLimit"]:
        raise ConfigError("broker.backpressure: expected 1 <= minLimit <= initialLimit <= maxLimit")
    gw = config["gateway"]
    if not isinstance(gw["maxMessageSize"], int) or gw["maxMessageSize"] < 1024:
        raise ConfigError("gateway.maxMessageSize: must be an integer of at least 1024 bytes")
    if not isinstance(gw["maxConcurrentStreams"], int) or gw["maxConcurrentStreams"] < 1:
        raise ConfigError("gateway.maxConcurrentStreams: must be a positive integer")
    rest_port = gw["rest"]["port"]
    if not isinstance(rest_port, int) or isinstance(rest_port, bool) or not -1 <= rest_port <= 65535:
        raise ConfigError(f"gateway.rest.port: not a port number (0: a free one, -1: off): {rest_port!r}")
    _validate_rest(gw["rest"])
    if not isinstance(config["clock"]["controlled"], bool):
        raise ConfigError("clock.controlled: must be true or false")
    history_url = gw["history"]["url"]
    if not isinstance(history_url, str) or (
        history_url and not history_url.startswith(("sqlite:///", "postgresql://", "postgres://"))
    ):
        raise ConfigError(f"gateway.history.url: expected sqlite:///path or postgresql://…, got {history_url!r}")
    _validate_security(config)
    if config["logging"]["format"] not in ("text", "json"):
        raise ConfigError("logging.format: must be 'text' or 'json'")
    for exporter_id, entry in config["broker"]["exporters"].items():
        if not isinstance(entry, Mapping) or not entry.get("className"):
            raise ConfigError(f"broker.exporters.{exporter_id}.className: required (an import path)")


def _validate_initialization(section: dict[str, Any]) -> None:
    """Users with a username and password (strings), and lists of names for the admin role."""
    where = "broker.security.initialization"
    users = section["users"]
    if not isinstance(users, list):
        raise ConfigError(f"{where}.users: expected a list of {{username, password, name, email}}")
    seen: set[str] = set()
    for i, user in enumerate(users):
        if not isinstance(user, Mapping):
            raise ConfigError(f"{where}.users[{i}]: expected a mapping with username and password")
        unknown = set(user) - {"username", "password", "name", "email"}
        if unknown:
            raise ConfigError(f"{where}.users[{i}]: unknown keys {sorted(unknown)} (username, password, name, email)")
        for key in ("username", "password"):
            if not isinstance(user.get(key), str) or not user[key]:
                raise ConfigError(f"{where}.users[{i}].{key}: required (a non-empty string; quote it in YAML)")
        for key in ("name", "email"):
            if not isinstance(user.get(key, ""), str):
                raise ConfigError(f"{where}.users[{i}].{key}: expected a string")
        if user["username"] in seen:
            raise ConfigError(f"{where}.users[{i}].username: '{user['username']}' is configured twice")
        seen.add(user["username"])
    admin = section["defaultRoles"].get("admin") if isinstance(section["defaultRoles"], Mapping) else None
    if not isinstance(admin, Mapping) or set(admin) - {"users", "clients"}:
        raise ConfigError(f"{where}.defaultRoles: expected admin: {{users: [...], clients: [...]}}")
    for key in ("users", "clients"):
        names = admin.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"{where}.defaultRoles.admin.{key}: expected a list of non-empty strings")


def _validate_rest(rest: dict[str, Any]) -> None:
    """The REST port's lists, caps and timeouts."""
    for key in ("allowedOrigins", "allowedHosts"):
        if not isinstance(rest[key], list) or not all(isinstance(v, str) and v for v in rest[key]):
            raise ConfigError(f"gateway.rest.{key}: must be a list of non-empty strings")
    for origin in rest["allowedOrigins"]:
        if origin != "*" and not re.match(r"https?://[^/]+/?$", origin):
            raise ConfigError(f"gateway.rest.allowedOrigins: '{origin}' is not an origin like https://host[:port]")
    for key in ("maxConnections", "maxResponseBytes", "maxConcurrentLargeResponses"):
        if not isinstance(rest[key], int) or isinstance(rest[key], bool) or rest[key] < 1:
            raise ConfigError(f"gateway.rest.{key}: must be a positive integer")
    for key in ("headerTimeout", "bodyTimeout", "idleTimeout"):
        if not isinstance(rest[key], int | float) or isinstance(rest[key], bool) or rest[key] <= 0:
            raise ConfigError(f"gateway.rest.{key}: must be a positive number of seconds")


def _validate_security(config: dict[str, Any]) -> None:
    """TLS needs its files; each authentication method needs what it checks against."""
    tls = config["gateway"]["security"]["tls"]
    if tls["enabled"] and not (tls["certificateChainPath"] and tls["privateKeyPath"]):
        raise ConfigError("gateway.security.tls: enabled needs certificateChainPath and privateKeyPath")
    authn = config["gateway"]["security"]["authentication"]
    for method in authn["methods"]:
        if method not in ("oauth", "basic"):
            raise ConfigError(f"gateway.security.authentication.methods: '{method}' is not one of oauth, basic")
    oauth = authn["oauth"]
    if "oauth" in authn["methods"] and not (oauth["jwksPath"] or oauth["jwksUrl"]):
        raise ConfigError("gateway.security.authentication.oauth: oauth needs jwksPath or jwksUrl")
    if "oauth" in authn["methods"] and not oauth["audience"]:
        raise ConfigError(
            "gateway.security.authentication.oauth.audience: required with oauth (the aud tokens are issued for)"
        )
    ttl = authn["identityCacheTtl"]
    if not isinstance(ttl, int | float) or isinstance(ttl, bool) or ttl < 0:
        raise ConfigError("gateway.security.authentication.identityCacheTtl: must be a number of seconds, at least 0")
    basic = authn["basic"]
    if not isinstance(basic["cacheTtl"], int | float) or isinstance(basic["cacheTtl"], bool) or basic["cacheTtl"] < 0:
        raise ConfigError("gateway.security.authentication.basic.cacheTtl: must be a number of seconds, at least 0")
    failures = basic["failuresPerMinute"]
    if not isinstance(failures, int) or isinstance(failures, bool) or failures < 0:
        raise ConfigError("gateway.security.authentication.basic.failuresPerMinute: must be an integer, at least 0")
    ctls = config["commandApi"]["tls"]
    if ctls["enabled"] and not (ctls["certificateChainPath"] and ctls["privateKeyPath"] and ctls["caPath"]):
        raise ConfigError("commandApi.tls: enabled needs certificateChainPath, privateKeyPath and caPath")
    if ctls["requireClientCertificate"] and not ctls["enabled"]:
        raise ConfigError("commandApi.tls.requireClientCertificate: needs commandApi.tls.enabled")


_SECRET_ARGS = ("password", "apikey", "token", "secret")


def dump(config: dict[str, Any]) -> str:
    """The configuration as YAML, with every secret masked (it is printed to terminals and logs): the command API
    secret, the Raft password, the admin token and exporter arguments named like a password, key, token or secret."""
    shown = copy.deepcopy(config)

    def mask(section: dict[str, Any], key: str) -> None:
        if section.get(key):
            section[key] = "(set)"

    mask(shown.get("commandApi", {}), "secret")
    broker = shown.get("broker", {})
    mask(broker.get("cluster", {}), "raftPassword")
    mask(broker, "adminToken")
    for user in broker.get("security", {}).get("initialization", {}).get("users") or []:
        if isinstance(user, dict):
            mask(user, "password")
    for entry in (broker.get("exporters") or {}).values():
        args = entry.get("args") if isinstance(entry, dict) else None
        if isinstance(args, dict):
            for name in list(args):
                if any(word in name.lower() for word in _SECRET_ARGS):
                    mask(args, name)
    return yaml.safe_dump(shown, sort_keys=False)
