"""The two segment engines (segment.engine: rules, the default, and sparknlp): the rules engine's vectorised
splitting on hand-made texts, its exactness (every sentence its span of the paragraph), the configuration's
checks, and the jars each engine needs (docs/segmentation.md, docs/platform.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

from conftest import REPO_ROOT
from ratio_spark.config import load_config
from ratio_spark.core.config import ConfigError
from ratio_spark.pipeline.segment import split_texts
from ratio_spark.pipeline.settings import SegmentConfig


def sentences(*texts: str | None, config: SegmentConfig | None = None) -> list[list[str]]:
    found = split_texts(pa.array(list(texts), pa.string()), config or SegmentConfig())
    out: list[list[str]] = [[] for _ in texts]
    for parent, idx, start, end, text in zip(found["parent"], found["sent_idx"], found["char_start"],
                                              found["char_end"], found["text"].to_pylist()):
        assert text == texts[parent][start:end]  # verbatim: the span of its paragraph
        assert idx == len(out[parent])
        out[parent].append(text)
    return out


def test_the_rules_split_where_a_sentence_ends():
    [found] = sentences(
        "As shown in Fig. 3 and Eq. (2) (cf. Sec. 4), Smith et al. (2019) agree. Jones et al. The next one "
        "starts here! Does it? Yes: J. Smith and A. B. Jones wrote U.S. law. We saw it (see above.) Then it "
        "went on... And on. . . and on. Esp. the end, etc. and more. Done."
    )
    assert found == [
        "As shown in Fig. 3 and Eq. (2) (cf. Sec. 4), Smith et al. (2019) agree.",
        "Jones et al.",  # "et al." before a capitalised word ends a sentence
        "The next one starts here!",
        "Does it?",
        "Yes: J. Smith and A. B. Jones wrote U.S. law.",  # initials never end one; "U.S. law" before lowercase
        "We saw it (see above.)",  # after the closer, not inside it
        "Then it went on...",  # a run of periods before a capital
        "And on. . . and on.",  # ... not before a lowercase word
        "Esp. the end, etc. and more.",
        "Done.",
    ]


def test_list_numbers_and_one_letter_sentences_are_not_swallowed():
    [found] = sentences("It ran for an hour. 3. One of the two runs failed. 4. The other did not.")
    assert found == ["It ran for an hour.", "3.", "One of the two runs failed.", "4.", "The other did not."]


def test_null_blank_and_unicode_texts():
    found = sentences(None, "", "   ", "  Ünïcödé 𝑥 ok.  Next one!\tLast?  ")
    assert found[:3] == [[], [], []]
    assert found[3] == ["Ünïcödé 𝑥 ok.", "Next one!", "Last?"]  # offsets in code points ("𝑥" is one)


def test_texts_holding_the_control_characters_come_back_exactly():
    # The mask and the split mark are control characters the batch lacks; a text holding U+0001 and U+0002
    # moves them to others and still comes back byte for byte.
    text = "A \x01 odd\x02 text. Fig. 2 shows\x00 it. End."
    [found] = sentences(text)
    assert found == ["A \x01 odd\x02 text.", "Fig. 2 shows\x00 it.", "End."]
    with pytest.raises(ValueError, match="control characters"):
        split_texts(pa.array(["".join(chr(c) for c in range(1, 9)) + ". x"]), SegmentConfig())


def test_a_batch_splits_as_its_texts_alone_and_slices_are_read_at_their_offset():
    texts = ["One. Two.", "Three (Fig. 1). Four?", "Five et al. (2001) said. Six."]
    alone = [sentences(t)[0] for t in texts]
    assert sentences(*texts) == alone
    sliced = pa.array(["ignored. Really."] + texts)[1:]  # a non-zero array offset, as Arrow batches may have
    found = split_texts(sliced, SegmentConfig())
    assert found["text"].to_pylist() == [s for group in alone for s in group]


def test_the_abbreviation_settings_apply():
    text = "See Fig. 2 and Smith et al. (2019) for more."
    assert sentences(text) == [[text]]
    assert sentences(text, config=SegmentConfig(abbreviations=[])) == [["See Fig.", "2 and Smith et al. (2019) for more."]]
    assert sentences(text, config=SegmentConfig(protect_et_al=False)) == [["See Fig. 2 and Smith et al.", "(2019) for more."]]
    assert sentences(text, config=SegmentConfig(abbreviations=[], protect_et_al=False)) == [
        ["See Fig.", "2 and Smith et al.", "(2019) for more."]]


def test_the_engine_is_validated_and_spark_nlp_keys_need_it():
    assert SegmentConfig().engine == "rules"
    with pytest.raises(ConfigError, match=r"segment\.engine"):
        load_config(None, ["segment.engine=spacy"])
    with pytest.raises(ConfigError, match=r"segment\.detect_lists only apply to segment\.engine: sparknlp"):
        load_config(None, ["segment.detect_lists=true"])
    assert load_config(None, ["segment.engine=sparknlp", "segment.detect_lists=true"]).segment.detect_lists
    # the resolved configuration (every key written out) loads back
    config = load_config(None, ["segment.engine=sparknlp"])
    assert load_config(None, [f"segment.engine={config.segment.engine}"]).segment == config.segment


# --- the jars each engine needs ---------------------------------------------------------------------------


def test_only_the_spark_nlp_engine_needs_the_spark_nlp_jars():
    from ratio_spark.pipeline.jars import components

    rules, sparknlp = load_config(None, []), load_config(None, ["segment.engine=sparknlp"])
    assert components(rules, ["ingest", "segment", "mine"]) == ("delta",)
    assert components(sparknlp, ["ingest", "segment"]) == ("delta", "sparknlp")
    assert components(sparknlp, ["mine", "pools"]) == ("delta",)  # no stage but segment runs the detector
    assert rules.spark.jars.packages_for(False) == ["io.delta:delta-spark_2.12:3.3.2"]
    assert rules.spark.jars.packages_for(True)[1].startswith("com.johnsnowlabs.nlp:spark-nlp_")


def test_jars_come_from_one_cached_folder_per_component(tmp_path):
    from ratio_spark.pipeline.jars import ensure_jars, is_cached

    for component, names in {"delta": ["delta-spark.jar", "shared.jar"], "sparknlp": ["spark-nlp.jar", "shared.jar"]}.items():
        folder = tmp_path / "p1" / component
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_bytes(b"")
    assert not is_cached("p1", tmp_path)
    (tmp_path / "p1" / "delta" / ".complete").write_text("")
    assert is_cached("p1", tmp_path, ["delta"]) and not is_cached("p1", tmp_path)
    assert [j.name for j in ensure_jars("p1", tmp_path, wanted=["delta"])] == ["delta-spark.jar", "shared.jar"]
    (tmp_path / "p1" / "sparknlp" / ".complete").write_text("")
    assert [j.name for j in ensure_jars("p1", tmp_path)] == ["delta-spark.jar", "shared.jar", "spark-nlp.jar"]


def test_two_processes_fetching_the_same_jars_at_once_run_maven_once(tmp_path, monkeypatch):
    """Two test workers (or two commands) on a fresh cache: the second waits for the first's Maven run and uses
    its jars, instead of running Maven beside it on the same local repository (half-copied jars). The ``mvn`` on
    PATH is a stand-in script (Maven itself is slow and needs the network); it logs each run and writes one jar."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runs = tmp_path / "runs.log"
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\necho run >> " + str(runs) + "\nsleep 2\n"
                   "for a in \"$@\"; do case $a in -DoutputDirectory=*) d=${a#-DoutputDirectory=};; esac; done\n"
                   "mkdir -p \"$d\" && echo jar > \"$d/x.jar\"\n")
    mvn.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    script = f"from ratio_spark.pipeline.jars import ensure_jars; print(ensure_jars('spark35', {str(tmp_path / 'cache')!r}, wanted=['delta']))"
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert runs.read_text().split() == ["run"]
    assert all("x.jar" in out for out, _ in outputs)


def test_an_unknown_jars_profile_is_one_line_before_maven_runs(tmp_path, capsys):
    from ratio_spark.cli.main import main
    from ratio_spark.pipeline.jars import spark_profiles

    assert spark_profiles() == ["spark35", "spark41"]
    assert main(["jars", "--profile", "nope", "--set", f"spark.jars.cache_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ratio-spark jars: error: unknown jars profile 'nope'; the pom has: spark35, spark41"]


def test_preflight_names_the_jars_of_the_engine(tmp_path):
    from ratio_spark.cli.preflight import pipeline_checks

    (tmp_path / "spark35" / "delta").mkdir(parents=True)
    (tmp_path / "spark35" / "delta" / ".complete").write_text("")
    base = [f"spark.jars.cache_dir={tmp_path}", f"tables.root={tmp_path / 'tables'}"]
    [rules] = [c for c in pipeline_checks(load_config(None, base), ["segment"]) if c.what == "jars"]
    assert rules.ok and "cached" in rules.detail and "Spark NLP" not in rules.detail
    [sparknlp] = [c for c in pipeline_checks(load_config(None, [*base, "segment.engine=sparknlp"]), ["segment"])
                  if c.what == "jars"]
    assert "Spark NLP" in sparknlp.detail and "cached" not in sparknlp.detail  # not cached: Maven fetches it


def test_spark_submit_without_the_engines_jars_names_the_fix():
    from ratio_spark.core.errors import UserError
    from ratio_spark.pipeline.session import _check_submitted_jars

    config = load_config(None, []).spark
    delta_only = {"spark.jars": "/c/delta/delta-spark_2.12-3.3.2.jar,/c/delta/delta-storage-3.3.2.jar"}
    _check_submitted_jars(config, delta_only, spark_nlp=False)  # enough for the rules engine
    with pytest.raises(UserError, match=r'--jars "\$\(ratio-spark jars --comma --set segment\.engine=sparknlp\)"'):
        _check_submitted_jars(config, delta_only, spark_nlp=True)
    with pytest.raises(UserError, match=r'--jars "\$\(ratio-spark jars --comma\)"'):
        _check_submitted_jars(config, {}, spark_nlp=False)


def test_ratio_spark_jars_lists_what_the_configuration_needs(capsys):
    from ratio_spark.cli.main import main

    assert main(["jars", "--comma"]) == 0
    default = capsys.readouterr().out.strip().split(",")
    assert main(["jars", "--comma", "--set", "segment.engine=sparknlp"]) == 0
    with_spark_nlp = capsys.readouterr().out.strip().split(",")
    assert any("delta-spark" in j for j in default) and not any("spark-nlp" in j for j in default)
    assert set(default) < set(with_spark_nlp) and any("spark-nlp_" in j for j in with_spark_nlp)


@pytest.mark.slow
def test_a_session_without_spark_nlp_refuses_the_sparknlp_engine_in_one_line(tmp_path):
    script = (
        "from ratio_spark.config import load_config\n"
        "from ratio_spark.pipeline.settings import SegmentConfig\n"
        "from ratio_spark.core.errors import UserError\n"
        "from ratio_spark.pipeline.session import build_spark_session, has_spark_nlp\n"
        "from ratio_spark.pipeline.segment import split_sentences\n"
        "spark = build_spark_session(load_config(None, ['spark.master=local[1]', 'spark.conf.spark.driver.memory=1g']).spark)\n"
        "print('has_spark_nlp', has_spark_nlp(spark))\n"
        "frame = spark.createDataFrame([(1, 'One. Two.')], 'id int, para_text string')\n"
        "print('rules', [r.text for r in split_sentences(frame, SegmentConfig()).collect()])\n"
        "try:\n"
        "    split_sentences(frame, SegmentConfig(engine='sparknlp'))\n"
        "except UserError as exc:\n"
        "    print('refused:', exc)\n"
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "has_spark_nlp False" in result.stdout
    assert "rules ['One.', 'Two.']" in result.stdout
    assert "refused: segment.engine sparknlp needs the Spark NLP jars" in result.stdout
