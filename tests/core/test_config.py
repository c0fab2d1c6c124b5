import pytest
import yaml

from ratio_spark.config import load_config
from ratio_spark.core.config import ConfigError

from conftest import REPO_ROOT


def test_every_bundled_conf_validates():
    for path in sorted((REPO_ROOT / "conf").glob("*.yaml")):
        config = load_config(path)
        assert config.spark.app_name, path


def test_sample_conf_resolves_extends_and_inputs():
    config = load_config(REPO_ROOT / "conf" / "sample.yaml")
    assert config.spark.master == "local[2]"  # from local.yaml
    assert config.tables.root == "data/tables/sample"
    assert [i.format for i in config.inputs] == ["tei"]
    assert config.tables.location("papers") == "data/tables/sample/papers"


def test_overrides_change_typed_values_and_spark_properties():
    config = load_config(
        REPO_ROOT / "conf" / "sample.yaml",
        ["spark.master=local[4]", "ingest.min_year=1990", "spark.conf.spark.sql.shuffle.partitions=3",
         "inputs.0.path=/elsewhere"],
    )
    assert config.spark.master == "local[4]"
    assert config.ingest.min_year == 1990
    assert config.spark.conf["spark.sql.shuffle.partitions"] == "3"
    assert config.inputs[0].path == "/elsewhere"


@pytest.mark.parametrize(
    "override, key",
    [
        ("spark.mastr=local", "spark.mastr"),
        ("ingest.min_year=soon", "ingest.min_year"),
        ("spark.jars.mode=maybe", "spark.jars.mode"),
        ("inputs.0.format=pdf", "inputs.0.format"),
    ],
)
def test_a_wrong_key_or_value_fails_naming_it(override, key):
    with pytest.raises(ConfigError) as excinfo:
        load_config(REPO_ROOT / "conf" / "sample.yaml", [override])
    assert key in str(excinfo.value)


def test_unknown_key_in_a_file_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  roots: /x\n")
    with pytest.raises(ConfigError, match=r"tables\.roots"):
        load_config(bad)


def test_resolved_config_prints_as_yaml_that_loads_back(tmp_path):
    config = load_config("emr")
    again = tmp_path / "again.yaml"
    again.write_text(config.to_yaml())
    assert load_config(again) == config
    assert yaml.safe_load(config.to_yaml())["spark"]["jars"]["mode"] == "packages"


def test_splits_must_be_in_time_order():
    with pytest.raises(ConfigError, match="split validation must start after train ends"):
        load_config(
            REPO_ROOT / "conf" / "sample.yaml",
            ["splits.validation.start=2014-06-01", "splits.validation.end=2014-12-31"],
        )


def test_a_wrong_set_key_names_set_as_its_source_not_the_file(tmp_path):
    """Issue 34: a misspelt --set key was reported as unknown "in <the config file>"; it came from --set."""
    with pytest.raises(ConfigError) as excinfo:
        load_config(REPO_ROOT / "conf" / "sample.yaml", ["ingest.min_body_char=100"])
    message = str(excinfo.value)
    assert "ingest.min_body_char: unknown key (from --set ingest.min_body_char=100)" in message
    assert "sample.yaml" not in message
    # A mistake in the file, with --set beside it, still names the file.
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  roots: /x\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(bad, ["spark.master=local[1]"])
    assert f"tables.roots: unknown key (in {bad})" in str(excinfo.value)
    assert "--set" not in str(excinfo.value)


@pytest.mark.parametrize("section", ["silver", "rerank"])
@pytest.mark.parametrize("override, key", [("batch_min_requests=0", "batch_min_requests"),
                                           ("batch_max_wait_s=-5", "batch_max_wait_s"),
                                           ("batch_poll_interval_s=0", "batch_poll_interval_s"),
                                           ("mode=bulk", "mode")])
def test_the_llm_transport_block_has_the_same_bounds_in_every_section(section, override, key):
    """silver: and rerank: share llm.settings.LLMTransportConfig: no bound of one may drift from the other's."""
    with pytest.raises(ConfigError, match=rf"{section}\.{key}"):
        load_config(None, [f"{section}.{override}"])
    from ratio_spark.llm.settings import LLMTransportConfig

    assert isinstance(getattr(load_config(None), section), LLMTransportConfig)


def test_a_silver_split_that_is_no_split_fails_at_load():
    with pytest.raises(ConfigError, match=r"silver\.split"):
        load_config(None, ["silver.split=tset"])
