"""ConnectionConfig resolves like the ``temporal`` CLI: temporal.toml profile, then TEMPORAL_*
variables, then flags; bad settings are SettingErrors that say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from statecore.temporal._connection import ConnectionConfig, TemporalUnreachableError
from statecore.temporal._devserver import free_port
from statecore.temporal._environment import SettingError

PROFILES = """\
[profile.default]
address = "file-default:7233"
namespace = "file-ns"

[profile.cloud]
address = "acct.tmprl.cloud:7233"
namespace = "ns.acct"
api_key = "file-key"

[profile.mtls]
address = "mtls:7233"
[profile.mtls.tls]
server_name = "file-name"
server_ca_cert_path = "{ca}"
client_cert_path = "{cert}"
client_key_path = "{key}"
"""


@pytest.fixture(autouse=True)
def no_default_temporal_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """temporalio finds the default temporal.toml through the process's XDG_CONFIG_HOME."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    for name in ("ca", "cert", "key"):
        (tmp_path / f"{name}.pem").write_text(f"{name} from the file\n")
    path = tmp_path / "temporal.toml"
    path.write_text(
        PROFILES.format(
            ca=tmp_path / "ca.pem", cert=tmp_path / "cert.pem", key=tmp_path / "key.pem"
        )
    )
    return path


def test_nothing_configured_is_a_local_plaintext_server() -> None:
    options = ConnectionConfig(environ={}).resolve()
    assert options == {"target_host": "localhost:7233", "namespace": "default"}


def test_the_default_file_is_found_like_the_temporal_cli_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "xdg"
    (home / "temporalio").mkdir(parents=True)
    (home / "temporalio" / "temporal.toml").write_text(
        '[profile.default]\naddress = "from-default-file:7233"\n'
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    assert ConnectionConfig(environ={}).resolve()["target_host"] == "from-default-file:7233"


def test_the_file_then_the_environment_then_the_flags(config_file: Path) -> None:
    file_only = ConnectionConfig(config_file=str(config_file), environ={}).resolve()
    assert file_only == {"target_host": "file-default:7233", "namespace": "file-ns"}

    env = {"TEMPORAL_CONFIG_FILE": str(config_file), "TEMPORAL_NAMESPACE": "env-ns"}
    from_env = ConnectionConfig(environ=env).resolve()
    assert from_env == {"target_host": "file-default:7233", "namespace": "env-ns"}

    flags = ConnectionConfig(address="flag:1", namespace="flag-ns", environ=env).resolve()
    assert flags == {"target_host": "flag:1", "namespace": "flag-ns"}


def test_a_profile_by_variable_or_flag_and_an_api_key_turns_tls_on(config_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(config_file), "TEMPORAL_PROFILE": "cloud"}
    cloud = ConnectionConfig(environ=env).resolve()
    assert cloud["target_host"] == "acct.tmprl.cloud:7233" and cloud["namespace"] == "ns.acct"
    assert cloud["api_key"] == "file-key" and cloud["tls"] is True

    keyed = ConnectionConfig(api_key="flag-key", environ={**env, "TEMPORAL_API_KEY": "env-key"})
    assert keyed.resolve()["api_key"] == "flag-key"
    assert (
        ConnectionConfig(environ={**env, "TEMPORAL_API_KEY": "env-key"}).resolve()["api_key"]
        == "env-key"
    )

    # The flag's profile wins over the variable's.
    chosen = ConnectionConfig(profile="default", environ=env).resolve()
    assert chosen["target_host"] == "file-default:7233" and "api_key" not in chosen


def test_mtls_files_from_the_profile_are_read_and_flags_replace_them(
    config_file: Path, tmp_path: Path
) -> None:
    base = {"TEMPORAL_CONFIG_FILE": str(config_file)}
    tls = ConnectionConfig(profile="mtls", environ=base).resolve()["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.domain == "file-name"
    assert tls.server_root_ca_cert == b"ca from the file\n"
    assert (tls.client_cert, tls.client_private_key) == (
        b"cert from the file\n",
        b"key from the file\n",
    )

    (tmp_path / "other-ca.pem").write_text("ca from the flag\n")
    env = {**base, "TEMPORAL_TLS_SERVER_NAME": "env-name"}
    from_env = ConnectionConfig(profile="mtls", environ=env).resolve()["tls"]
    assert isinstance(from_env, TLSConfig) and from_env.domain == "env-name"
    flagged = ConnectionConfig(
        profile="mtls",
        tls_ca_path=str(tmp_path / "other-ca.pem"),
        tls_server_name="flag-name",
        environ=env,
    ).resolve()["tls"]
    assert isinstance(flagged, TLSConfig)
    assert flagged.domain == "flag-name"
    assert flagged.server_root_ca_cert == b"ca from the flag\n"
    assert flagged.client_cert == b"cert from the file\n"


def test_tls_variables_alone_and_tls_turned_off(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("ca\n")
    env = {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tmp_path / "ca.pem")}
    tls = ConnectionConfig(environ=env).resolve()["tls"]
    assert isinstance(tls, TLSConfig) and tls.server_root_ca_cert == b"ca\n"
    assert ConnectionConfig(environ={"TEMPORAL_TLS": "true"}).resolve()["tls"] == TLSConfig()
    off = ConnectionConfig(tls=False, environ={"TEMPORAL_API_KEY": "k"}).resolve()
    assert off["tls"] is False and off["api_key"] == "k"
    assert (
        ConnectionConfig(environ={"TEMPORAL_TLS": "false", "TEMPORAL_API_KEY": "k"}).resolve()[
            "tls"
        ]
        is False
    )


def test_empty_variables_count_as_unset(config_file: Path) -> None:
    env = {
        "TEMPORAL_ADDRESS": "",
        "TEMPORAL_NAMESPACE": "",
        "TEMPORAL_API_KEY": "",
        "TEMPORAL_TLS": "",
        "TEMPORAL_PROFILE": "",
        "TEMPORAL_CONFIG_FILE": str(config_file),
    }
    assert ConnectionConfig(environ=env).resolve() == {
        "target_host": "file-default:7233",
        "namespace": "file-ns",
    }


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (ConnectionConfig(environ={"TEMPORAL_TLS": "maybe"}), "TEMPORAL_TLS: 'maybe' is not a"),
        (ConnectionConfig(profile="nope", environ={}), "Profile 'nope' not found"),
        (ConnectionConfig(config_file="/no/such.toml", environ={}), "/no/such.toml"),
        (
            ConnectionConfig(environ={"TEMPORAL_CONFIG_FILE": "/no/env.toml"}),
            "no Temporal config file at /no/env.toml",
        ),
        (ConnectionConfig(tls_ca_path="/no/ca.pem", environ={}), "/no/ca.pem"),
        (ConnectionConfig(tls_cert_path="/no/cert.pem", environ={}), "both a client certificate"),
        (
            ConnectionConfig(tls=False, tls_ca_path="/x", environ={}),
            "--tls-ca-path given with TLS turned off (--no-tls)",
        ),
    ],
)
def test_bad_settings_say_what_is_wrong(config: ConnectionConfig, says: str) -> None:
    with pytest.raises(SettingError) as raised:
        config.resolve()
    assert says in raised.value.message


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[profile.default\naddress=")
    with pytest.raises(SettingError, match=r"broken\.toml"):
        ConnectionConfig(config_file=str(path), environ={}).resolve()


def test_the_api_key_is_kept_out_of_repr_and_descriptions() -> None:
    config = ConnectionConfig(address="x:1", api_key="sekrit", environ={})
    assert "sekrit" not in repr(config) and "sekrit" not in config.describe()
    assert config.describe() == "x:1 (namespace default, TLS, API key)"


async def test_connect_fails_in_bounded_time_naming_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = ConnectionConfig(address=address, environ={}, connect_timeout=5)
    with pytest.raises(TemporalUnreachableError) as raised:
        await config.connect()
    assert f"cannot reach Temporal at {address} (namespace default, plaintext)" in (
        raised.value.message
    )


def test_connect_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="connect_timeout"):
        ConnectionConfig(connect_timeout=0)
