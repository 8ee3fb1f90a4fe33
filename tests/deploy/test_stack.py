"""The docker-compose stack, checked without a Docker engine: structure, references, ports, volumes, configs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.backends.servers import ROOT, find_tool

SERVICES = {"volume-init", "otel-collector", "jaeger", "prometheus", "grafana", "dashboard", "demo-agent"}
CLICKHOUSE_PROFILE = {"clickhouse", "otel-collector-clickhouse", "dashboard-clickhouse", "rollup-clickhouse"}
ONE_SHOT = {"volume-init"}
COLLECTOR_UID = 10001  # the user (and group) of the otel/opentelemetry-collector-contrib image


def load(path: str) -> Any:
    return yaml.safe_load((ROOT / path).read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load("docker-compose.yml")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return load("deploy/otel-collector.yaml")  # type: ignore[no-any-return]


def env(service: dict[str, Any]) -> dict[str, str]:
    value = service.get("environment") or {}
    return dict(item.split("=", 1) for item in value) if isinstance(value, list) else dict(value)


def published(service: dict[str, Any]) -> dict[int, int]:
    """host port -> container port."""
    out = {}
    for spec in service.get("ports", []):
        host, container = str(spec).split(":")[-2:]
        out[int(host)] = int(container.split("/")[0])
    return out


def test_services_images_and_healthchecks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == SERVICES | CLICKHOUSE_PROFILE
    for name, service in services.items():
        image = service.get("image")
        assert image, f"{name} has no image"
        if "build" not in service:
            repository, _, tag = image.rpartition(":")
            assert repository and tag and tag != "latest", f"{name}: image {image} is not pinned"
            assert re.fullmatch(r"v?\d+\.\d+\.\d+(\.\d+)?", tag), f"{name}: {image} is not pinned to a release"
        if name not in ONE_SHOT:
            test = service.get("healthcheck", {}).get("test")
            assert test and test[0] == "CMD", f"{name} has no healthcheck"
            assert service.get("restart") == "unless-stopped", name
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"


def test_every_referenced_file_exists(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if "build" in service:
            assert (ROOT / service["build"] / "Dockerfile").is_file(), name
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in compose["volumes"], f"{name} uses undeclared volume {source}"


def test_ports_are_unique_and_match_the_configs(compose: dict[str, Any], collector: dict[str, Any]) -> None:
    services = compose["services"]
    hosts = [port for service in services.values() for port in published(service)]
    assert len(hosts) == len(set(hosts)), "a host port is published twice"
    protocols = collector["receivers"]["otlp"]["protocols"]
    grpc, http = (int(protocols[p]["endpoint"].rsplit(":", 1)[1]) for p in ("grpc", "http"))
    assert {grpc: grpc, http: http}.items() <= published(services["otel-collector"]).items()
    health = int(collector["extensions"]["health_check"]["endpoint"].rsplit(":", 1)[1])
    assert published(services["otel-collector"])[health] == health

    # the demo agent exports OTLP/HTTP to the Collector's HTTP receiver
    agent = env(services["demo-agent"])
    endpoint = urlparse(agent["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert (endpoint.hostname, endpoint.port, agent["OTEL_EXPORTER_OTLP_PROTOCOL"]) == (
        "otel-collector",
        http,
        "http/protobuf",
    )
    # the Collector sends traces to Jaeger's OTLP gRPC port on the compose network
    jaeger = collector["exporters"]["otlp/jaeger"]["endpoint"]
    assert jaeger.split(":")[0] in services and jaeger.endswith(":4317")
    # Prometheus scrapes the Collector's prometheus exporter
    scrape_port = int(collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1])
    targets = [
        t
        for job in load("deploy/prometheus.yml")["scrape_configs"]
        for c in job["static_configs"]
        for t in c["targets"]
    ]
    assert targets == [f"otel-collector:{scrape_port}"]
    # Grafana reads that Prometheus; the dashboard links to the Jaeger UI that is published
    datasource = load("deploy/grafana/provisioning/datasources/prometheus.yml")["datasources"][0]["url"]
    assert datasource == f"http://prometheus:{published(services['prometheus'])[9090]}"
    trace_url = urlparse(env(services["dashboard"])["OTEL_REPEAT_GUARD_TRACE_URL"])
    assert trace_url.port in published(services["jaeger"]) and "{trace_id}" in trace_url.path


def test_the_file_exporter_output_is_what_the_dashboard_ingests(
    compose: dict[str, Any], collector: dict[str, Any]
) -> None:
    services = compose["services"]
    path = collector["exporters"]["file"]["path"]
    mounts = {
        name: {v.split(":")[1]: v.split(":")[0] for v in services[name]["volumes"]}
        for name in services
        if "volumes" in services[name]
    }
    directory = str(Path(path).parent)
    assert mounts["otel-collector"][directory] == mounts["dashboard"][directory] == mounts["volume-init"][directory]
    assert env(services["dashboard"])["TRACES_FILE"] == path
    assert services["dashboard"]["volumes"][0].endswith(":ro")  # the dashboard only reads the Collector's file


def test_collector_pipelines_reference_only_defined_components(collector: dict[str, Any]) -> None:
    service = collector["service"]
    for extension in service["extensions"]:
        assert extension in collector["extensions"]
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    for name, pipeline in service["pipelines"].items():
        assert name.split("/")[0] in {"traces", "metrics", "logs"}
        for kind, seen in used.items():
            for component in pipeline.get(kind, []):
                assert component in collector[kind], f"pipeline {name} uses undefined {kind[:-1]} {component}"
                seen.add(component)
    for kind, names in used.items():
        assert names == set(collector[kind]), f"defined but unused {kind}: {set(collector[kind]) - names}"
    assert "file" in service["pipelines"]["traces"]["exporters"]
    assert "prometheus" in service["pipelines"]["metrics"]["exporters"]


def test_prometheus_keeps_the_service_the_collector_names_as_the_job() -> None:
    """The Collector's prometheus exporter sets job from service.name; the dashboard's Service variable is job. Not
    honored, Prometheus renames it exported_job and sets job to its own job name, and every Service filter fails."""
    (job,) = load("deploy/prometheus.yml")["scrape_configs"]
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/loop-hotspots.json").read_text())
    (service,) = [v for v in dashboard["templating"]["list"] if v["name"] == "service"]
    assert service["query"]["query"].endswith(", job)")
    assert job["honor_labels"] is True


def test_promtool_accepts_the_prometheus_config() -> None:
    promtool = find_tool("PROMTOOL_BIN", "/usr/bin/promtool")
    done = subprocess.run(
        [str(promtool), "check", "config", str(ROOT / "deploy/prometheus.yml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def promtool(*args: str) -> str:
    """``promtool ARGS`` must succeed; its output."""
    done = subprocess.run(
        [str(find_tool("PROMTOOL_BIN", "/usr/bin/promtool")), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load("deploy/prometheus-rules.yml")["groups"] for rule in group["rules"]]


def test_prometheus_loads_the_alert_rules_that_compose_mounts(compose: dict[str, Any]) -> None:
    """rule_files are relative to the config's folder: deploy/ here, /etc/prometheus/ in the container."""
    (rules,) = load("deploy/prometheus.yml")["rule_files"]
    mounts = dict(v.removesuffix(":ro").split(":") for v in compose["services"]["prometheus"]["volumes"])
    config = next(target for source, target in mounts.items() if source == "./deploy/prometheus.yml")
    assert mounts[f"./deploy/{rules}"] == str(Path(config).parent / rules)
    assert "SUCCESS: 1 rule files found" in promtool("check", "config", str(ROOT / "deploy/prometheus.yml"))


def test_the_alerts_are_advisory_described_and_on_the_names_grafana_queries() -> None:
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/loop-hotspots.json").read_text())
    queried = set(
        re.findall(r"repeat_tool_guard_\w+", " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"]))
    )
    rules = alert_rules()
    assert len(rules) >= 3
    for rule in rules:
        names = set(re.findall(r"repeat_tool_guard_\w+", rule["expr"]))
        assert names and names <= queried, f"{rule['alert']}: {names - queried} is not a name Grafana queries"
        assert rule["labels"]["severity"] in {"info", "warning"}, f"{rule['alert']} is not advisory"
        assert set(rule["annotations"]) >= {"summary", "description"}, rule["alert"]
    assert f"SUCCESS: {len(rules)} rules found" in promtool("check", "rules", str(ROOT / "deploy/prometheus-rules.yml"))


def test_each_alert_fires_in_its_promtool_unit_test() -> None:
    tests = ROOT / "tests/deploy/prometheus-rules.test.yml"
    cases = [case for test in yaml.safe_load(tests.read_text())["tests"] for case in test["alert_rule_test"]]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert fired == quiet == {rule["alert"] for rule in alert_rules()}  # each shown to fire, and not to, on series
    assert "SUCCESS" in promtool("test", "rules", str(tests))


def test_grafana_dashboard_queries_the_guards_metric_names() -> None:
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/loop-hotspots.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = set(re.findall(r"repeat_tool_guard_[a-z_]+?_(?:total|bucket|count|sum)\b", " ".join(exprs)))
    assert names == {
        "repeat_tool_guard_repeated_calls_total",
        "repeat_tool_guard_reminders_total",
        "repeat_tool_guard_run_length_bucket",
        "repeat_tool_guard_reminder_outcomes_total",
        "repeat_tool_guard_unguarded_calls_total",
        "repeat_tool_guard_wasted_time_seconds_total",
        "repeat_tool_guard_wasted_tokens_total",
    }


def dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_dockerfile_runs_the_entrypoint_the_tests_run(compose: dict[str, Any]) -> None:
    lines = dockerfile()
    assert 'ENTRYPOINT ["dashboard-entrypoint.sh"]' in lines
    assert "COPY deploy/dashboard-entrypoint.sh /usr/local/bin/dashboard-entrypoint.sh" in lines
    install = next(line for line in lines if line.startswith("RUN pip install"))
    extras = set(re.search(r"'\.\[([a-z,-]+)\]'", install).group(1).split(","))  # type: ignore[union-attr]
    assert {"dashboard", "ingest", "otlp"} <= extras  # what the entrypoint test and demo-agent test import
    health = next(line for line in lines if line.startswith("HEALTHCHECK"))
    assert json.loads(health.split("CMD", 1)[1]) == compose["services"]["dashboard"]["healthcheck"]["test"][1:]
    assert (ROOT / "deploy/dashboard-entrypoint.sh").stat().st_mode & 0o111, "the entrypoint must be executable"
    script = (ROOT / "deploy/dashboard-entrypoint.sh").read_text()
    assert 'otel-repeat-guard ingest --follow --quiet --db "$DB" "$TRACES_FILE"' in script
    assert 'otel-repeat-guard dashboard --db "$DB" --host "$HOST" --port "$PORT" --trace-url "$TRACE_URL"' in script
    dashboard_env = env(compose["services"]["dashboard"])
    assert {"TRACES_FILE", "OTEL_REPEAT_GUARD_DB", "DASHBOARD_HOST", "DASHBOARD_PORT"} <= set(dashboard_env)
    assert shlex.split(f"x {dashboard_env['DASHBOARD_PORT']}")[1] == str(
        published(compose["services"]["dashboard"])[8501]
    )


def image_user() -> tuple[int, int]:
    """The uid and gid of the Dockerfile's last USER: numeric, so Kubernetes' runAsNonRoot can check it."""
    users = [line.split(None, 1)[1] for line in dockerfile() if line.startswith("USER ")]
    assert users, "the image runs as root: no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and gid.isdigit(), f"USER {users[-1]}: give a numeric uid:gid"
    return int(uid), int(gid)


def test_the_dashboard_image_runs_as_an_unprivileged_user_that_owns_the_store_folder(compose: dict[str, Any]) -> None:
    uid, gid = image_user()
    assert uid != 0 and gid != 0
    lines = dockerfile()
    user = max(i for i, line in enumerate(lines) if line.startswith("USER "))
    assert user > max(i for i, line in enumerate(lines) if line.startswith("RUN ")), "a RUN after USER runs as root"
    image_env = dict(word.split("=", 1) for line in lines if line.startswith("ENV ") for word in shlex.split(line)[1:])
    store = Path(env(compose["services"]["dashboard"])["OTEL_REPEAT_GUARD_DB"]).parent
    assert Path(image_env["OTEL_REPEAT_GUARD_DB"]).parent == store
    # The image's folder is the user's: Docker fills a fresh named volume from it, ownership and mode included.
    install = next(line for line in lines if line.startswith("RUN pip install"))
    assert f"install -d -o {uid} -g {gid} -m 0750 {store}" in install
    assert f"dashboard-data:{store}" in compose["services"]["dashboard"]["volumes"]


def test_the_image_user_is_the_collectors_so_it_reads_what_the_collector_writes(compose: dict[str, Any]) -> None:
    """The Collector (uid 10001) writes the file exporter's output into the telemetry volume that volume-init gives
    it; the dashboard reads that volume as the same uid, and is handed its store's volume by the same step (one an
    older, root image wrote included)."""
    uid, gid = image_user()
    assert (uid, gid) == (COLLECTOR_UID, COLLECTOR_UID)
    init = compose["services"]["volume-init"]
    assert f"chown -R {uid}:{gid} /var/lib/otel /var/lib/repeat-guard" in init["command"][-1]
    assert set(init["volumes"]) == {"telemetry:/var/lib/otel", "dashboard-data:/var/lib/repeat-guard"}
    ready = {"condition": "service_completed_successfully"}
    assert compose["services"]["dashboard"]["depends_on"]["volume-init"] == ready


@pytest.mark.skipif(os.geteuid() != 0, reason="makes files as other users: root only")
def test_only_the_collectors_uid_reads_an_owner_only_file_the_collector_wrote() -> None:
    """The file exporter opens its file 0600 when it does not rotate, and lumberjack (when it does) keeps an old
    file's mode: a file in that mode, in a folder as volume-init leaves it, is read by the image's user only."""
    uid, gid = image_user()
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # not under pytest's 0700 root-owned base
        os.chown(folder, COLLECTOR_UID, COLLECTOR_UID)
        os.chmod(folder, 0o755)
        traces = Path(folder) / "traces.jsonl"
        traces.write_bytes(b"{}\n")
        os.chown(traces, COLLECTOR_UID, COLLECTOR_UID)
        traces.chmod(0o600)

        def reads(user: int, group: int) -> bool:
            done = subprocess.run(
                ["cat", str(traces)],
                check=False,
                user=user,
                group=group,
                extra_groups=[],
                capture_output=True,
                timeout=10,
            )
            return done.returncode == 0 and done.stdout == b"{}\n"

        assert reads(uid, gid)
        assert not reads(uid + 1, gid)  # another unprivileged user, even in the Collector's group, does not


_INTERPOLATION = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def _bind_address(spec: str) -> str:
    """The host address a published port binds to, with compose's ${VAR:-default} read at its default."""
    resolved = _INTERPOLATION.sub(lambda m: m[2] or "", spec)
    parts = resolved.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else "0.0.0.0"  # "host:container" alone binds every interface


def test_every_published_port_binds_to_loopback_unless_opened_on_purpose(compose: dict[str, Any]) -> None:
    specs = [str(spec) for service in compose["services"].values() for spec in service.get("ports", [])]
    assert specs, "no ports published"
    assert {_bind_address(spec) for spec in specs} == {"127.0.0.1"}
    assert all(spec.startswith("${OTEL_REPEAT_GUARD_BIND:-127.0.0.1}:") for spec in specs)  # one variable opens it
    assert _bind_address("8501:8501") == "0.0.0.0"  # the check itself can fail


def test_grafana_needs_a_login_and_a_password_of_the_users(compose: dict[str, Any]) -> None:
    grafana = env(compose["services"]["grafana"])
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert grafana["GF_USERS_ALLOW_SIGN_UP"] == "false"
    password = grafana["GF_SECURITY_ADMIN_PASSWORD"]
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", password), password  # compose refuses without it


def test_the_clickhouse_profile_is_off_by_default_and_needs_a_password(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in CLICKHOUSE_PROFILE:
        assert services[name].get("profiles") == ["clickhouse"], f"{name} would start with a plain `up`"
    for name in SERVICES:
        assert "profiles" not in services[name]
    server = services["clickhouse"]
    assert 'test -n "$$CLICKHOUSE_PASSWORD"' in " ".join(server["entrypoint"])  # no server without one
    assert env(server)["CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT"] == "0"
    command = services["dashboard-clickhouse"]["command"]
    store = command[command.index("--store") + 1]
    assert (
        store.startswith("clickhouse://otel@clickhouse:8123/")
        and ":" not in store.split("@")[0][len("clickhouse://") :]
    )
    assert env(services["dashboard-clickhouse"])["OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD"] == "${CLICKHOUSE_PASSWORD:-}"


def test_no_healthcheck_or_command_carries_a_password_in_its_arguments(compose: dict[str, Any]) -> None:
    """A process's arguments are world-readable (``ps``, ``/proc``) and a healthcheck's are kept in the container's
    configuration: passwords reach services through their environment only."""
    for name, service in compose["services"].items():
        for part in ("command", "entrypoint"):
            value = service.get(part) or []
            words = value if isinstance(value, list) else value.split()
            assert not any("--password" in str(word) for word in words), f"{name}'s {part}"
        words = [str(word) for word in service.get("healthcheck", {}).get("test", [])]
        assert not any("password" in word.lower() or "${" in word for word in words), f"{name}'s healthcheck: {words}"


def test_the_clickhouse_dashboard_reads_the_rollup_the_profile_keeps_current(compose: dict[str, Any]) -> None:
    """At millions of spans the page is fast through the rollup only (benchmarks/RESULTS.md): the profile runs
    `rollup` on a loop into the database the dashboard's URL names, with the same table and credentials."""
    from otel_repeat_guard.clickhouse.target import parse as parse_target

    services = compose["services"]
    command = services["dashboard-clickhouse"]["command"]
    read = parse_target(command[command.index("--store") + 1])
    rolling = services["rollup-clickhouse"]
    written = parse_target(env(rolling)["STORE"])
    assert read == written and read.rollup == "guard" and read.rollup != read.database
    loop = rolling["command"][0]
    assert 'if otel-repeat-guard rollup --store "$$STORE"; then touch /tmp/rolled; sleep 300; else sleep 30; fi' in loop
    # the table exists before the first run (the Collector creates it), the rollup before the page reads it
    assert rolling["depends_on"]["otel-collector-clickhouse"] == {"condition": "service_healthy"}
    dashboard = services["dashboard-clickhouse"]
    assert dashboard["depends_on"]["rollup-clickhouse"] == {"condition": "service_healthy"}
    assert env(rolling)["OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD"] == "${CLICKHOUSE_PASSWORD:-}"
    assert "ports" not in rolling  # it listens on nothing


def test_the_clickhouse_collector_writes_the_table_the_dashboard_reads() -> None:
    collector = load("deploy/otel-collector-clickhouse.yaml")
    exporter = collector["exporters"]["clickhouse"]
    assert (exporter["database"], exporter["traces_table_name"]) == ("otel", "otel_traces")
    assert exporter["password"] == "${env:CLICKHOUSE_PASSWORD}"
    assert collector["service"]["pipelines"]["traces"]["exporters"] == ["clickhouse"]


def test_the_guards_log_events_go_where_ingest_reads_them() -> None:
    """The logs pipelines (issue 42): the file exporter's one file holds trace and log requests, so ``ingest``
    finds each log event's span beside it; the ClickHouse collector writes ``otel_logs`` beside ``otel_traces``."""
    for path, exporter in (
        ("deploy/otel-collector.yaml", "file"),
        ("deploy/otel-collector-clickhouse.yaml", "clickhouse"),
    ):
        config = load(path)
        pipelines = config["service"]["pipelines"]
        assert pipelines["logs"]["exporters"] == [exporter] and exporter in pipelines["traces"]["exporters"]
        assert set(pipelines["logs"]["receivers"]) <= set(config["receivers"])
        assert set(pipelines["logs"]["processors"]) <= set(config["processors"])
    clickhouse = load("deploy/otel-collector-clickhouse.yaml")["exporters"]["clickhouse"]
    assert clickhouse["logs_table_name"] == "otel_logs"
